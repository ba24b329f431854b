# Text files compiled into a library as C++ strings: how the kernel runtime's sources and the fixed
# C of the libraries tunefarm builds travel inside the programs that build them.
# tunefarm_embed_text(TEMPLATE OUTPUT VAR FILE [VAR FILE ...]) reads each FILE into VAR and
# configures TEMPLATE (a .cc.in holding @VAR@ in a raw string) into OUTPUT; editing a FILE
# reconfigures.
function(tunefarm_embed_text template output)
  set(pairs ${ARGN})
  list(LENGTH pairs count)
  math(EXPR last "${count} - 1")
  foreach(i RANGE 0 ${last} 2)
    math(EXPR next "${i} + 1")
    list(GET pairs ${i} var)
    list(GET pairs ${next} file)
    file(READ ${file} ${var})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
  endforeach()
  configure_file(${template} ${output} @ONLY)
endfunction()
