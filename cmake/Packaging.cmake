# Debian packages, built by CPack's DEB generator (`make packages`, or the `packages` target):
#   tunefarm-agent   device-agent, its sandbox worker and probe kernel  (amd64, arm64 from a cross build)
#   tunefarm-server  trackerd, tunerd and the helper programs tunerd runs
#   tunefarm-client  tune-client
# A package is made only from what this configure builds, so an agent-only configure (a cross build
# for the boards) yields the agent package alone, for the architecture it was built for.
#
# Layout: programs find their helpers (and the worker its probe kernel) beside their own file
# (common/helper_program.h), so each daemon package keeps its programs and its copy of the kernel
# runtime in a private directory, /usr/lib/tunefarm-<package>, reached from /usr/bin through
# symbolic links. Private directories per package let the agent and the server each carry the
# runtime library without two packages owning one file.

include(GNUInstallDirs)

# Debian's name for the architecture the build is for: a cross toolchain file sets CMAKE_SYSTEM_PROCESSOR.
string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" tunefarm_processor)
if(tunefarm_processor MATCHES "^(x86_64|amd64)$")
  set(TUNEFARM_DEB_ARCH amd64)
elseif(tunefarm_processor MATCHES "^(aarch64|arm64)$")
  set(TUNEFARM_DEB_ARCH arm64)
else()
  message(STATUS "Packaging: no Debian architecture known for ${CMAKE_SYSTEM_PROCESSOR}; no packages")
  return()
endif()

set(TUNEFARM_DEB_PREFIX /usr)
set(TUNEFARM_CONFIG_DIR /etc/tunefarm)
# Debian 12 installs units under /lib (moving them to /usr/lib is later Debian's work).
set(TUNEFARM_UNIT_DIR /lib/systemd/system)
set(TUNEFARM_DEB_SOURCE ${PROJECT_SOURCE_DIR}/deploy)
set(TUNEFARM_DEB_STAGE ${CMAKE_BINARY_DIR}/deb)

# The packages this configure can make: each needs every program it ships.
set(TUNEFARM_DEB_COMPONENTS)
if(TARGET device-agent AND TARGET tunefarm-measure-worker)
  list(APPEND TUNEFARM_DEB_COMPONENTS agent)
endif()
if(TARGET trackerd AND TARGET tunerd AND TARGET tunefarm-build-library AND TARGET tunefarm-model-import)
  list(APPEND TUNEFARM_DEB_COMPONENTS server)
endif()
if(TARGET tune-client)
  list(APPEND TUNEFARM_DEB_COMPONENTS client)
endif()
if(NOT TUNEFARM_DEB_COMPONENTS)
  return()
endif()

# tunefarm_deb_private_programs(COMPONENT TARGETS... LINKS programs...): the targets into the
# package's private directory, with the kernel runtime beside them, and /usr/bin links to LINKS.
function(tunefarm_deb_private_programs component)
  cmake_parse_arguments(P "" "" "TARGETS;LINKS" ${ARGN})
  set(dir lib/tunefarm-${component})
  foreach(target ${P_TARGETS})
    # The kernel runtime is found beside the program, wherever the package puts both.
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN")
  endforeach()
  install(TARGETS ${P_TARGETS} tunefarm_rt
          RUNTIME DESTINATION ${dir} COMPONENT ${component}
          LIBRARY DESTINATION ${dir} COMPONENT ${component})
  foreach(program ${P_LINKS})
    file(MAKE_DIRECTORY ${TUNEFARM_DEB_STAGE}/${component}/bin)
    file(CREATE_LINK ../lib/tunefarm-${component}/${program} ${TUNEFARM_DEB_STAGE}/${component}/bin/${program} SYMBOLIC)
    install(FILES ${TUNEFARM_DEB_STAGE}/${component}/bin/${program} DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${component})
  endforeach()
endfunction()

# tunefarm_deb_service_files(COMPONENT CONFIGS tomls... UNITS units... ENABLE units... INSTANCES globs...):
# the configs under /etc/tunefarm (conffiles), the systemd units, and the maintainer scripts made
# from deploy/debian/*.in: ENABLE are enabled (and started where systemd runs) on install;
# INSTANCES, the running instances of a template, are restarted on upgrade; both stop on removal.
function(tunefarm_deb_service_files component)
  cmake_parse_arguments(S "" "" "CONFIGS;UNITS;ENABLE;INSTANCES" ${ARGN})
  set(control ${TUNEFARM_DEB_STAGE}/${component}/control)
  set(conffiles "")
  foreach(config ${S_CONFIGS})
    install(FILES ${TUNEFARM_DEB_SOURCE}/config/${config} DESTINATION ${TUNEFARM_CONFIG_DIR} COMPONENT ${component})
    string(APPEND conffiles "${TUNEFARM_CONFIG_DIR}/${config}\n")
  endforeach()
  foreach(unit ${S_UNITS})
    install(FILES ${TUNEFARM_DEB_SOURCE}/systemd/${unit} DESTINATION ${TUNEFARM_UNIT_DIR} COMPONENT ${component})
  endforeach()
  file(WRITE ${control}/conffiles "${conffiles}")
  set(TUNEFARM_DEB_PACKAGE tunefarm-${component})
  list(JOIN S_ENABLE " " TUNEFARM_DEB_ENABLE_UNITS)
  list(JOIN S_INSTANCES " " TUNEFARM_DEB_INSTANCE_UNITS)
  foreach(script postinst prerm postrm)
    configure_file(${TUNEFARM_DEB_SOURCE}/debian/${script}.in ${control}/${script} @ONLY
                   FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
  string(TOUPPER ${component} upper)
  set(CPACK_DEBIAN_${upper}_PACKAGE_CONTROL_EXTRA
      ${control}/conffiles ${control}/postinst ${control}/prerm ${control}/postrm PARENT_SCOPE)
endfunction()

# The other packages whose maintainer scripts share the system user with this one: the last of them
# to be purged removes it.
set(TUNEFARM_DEB_SERVICE_PACKAGES "tunefarm-agent tunefarm-server")

set(TUNEFARM_DEB_TARGETS)
if(agent IN_LIST TUNEFARM_DEB_COMPONENTS)
  # The worker needs its probe kernel beside it (measure/measure.h).
  tunefarm_deb_private_programs(agent TARGETS device-agent tunefarm-measure-worker LINKS device-agent)
  install(TARGETS tunefarm-probe-kernel LIBRARY DESTINATION lib/tunefarm-agent COMPONENT agent)
  tunefarm_deb_service_files(agent CONFIGS agent.toml UNITS tunefarm-agent@.service INSTANCES "tunefarm-agent@*.service")
  set(CPACK_DEBIAN_AGENT_PACKAGE_NAME tunefarm-agent)
  set(CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS "adduser, init-system-helpers (>= 1.54~)")
  set(CPACK_DEBIAN_AGENT_DESCRIPTION "tunefarm device agent: measures tensor kernels on this board for a tunefarm tracker
device-agent dials out to a tunefarm tracker and measures the candidate kernels it is sent in a
sandboxed worker process. Run one per device key: systemctl enable --now tunefarm-agent@KEY.")
  list(APPEND TUNEFARM_DEB_TARGETS device-agent tunefarm-measure-worker tunefarm-probe-kernel)
endif()
if(server IN_LIST TUNEFARM_DEB_COMPONENTS)
  # tune-client (in /usr/bin) finds tunefarm-build-library for `build --from-records` through its link.
  tunefarm_deb_private_programs(server TARGETS trackerd tunerd tunefarm-build-library tunefarm-model-import
                                LINKS trackerd tunerd tunefarm-build-library)
  tunefarm_deb_service_files(server CONFIGS trackerd.toml tunerd.toml
                             UNITS tunefarm-trackerd.service tunefarm-tunerd.service
                             ENABLE tunefarm-trackerd.service tunefarm-tunerd.service)
  set(CPACK_DEBIAN_SERVER_PACKAGE_NAME tunefarm-server)
  # What tunerd runs besides its own helpers: the linker for candidates, the C and C++ compilers,
  # ar and objcopy for kernel libraries, and the dashboard's Chart.js.
  set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "adduser, init-system-helpers (>= 1.54~), binutils, gcc, g++, libjs-chart.js")
  set(CPACK_DEBIAN_SERVER_PACKAGE_SUGGESTS "tunefarm-client, g++-aarch64-linux-gnu")
  set(CPACK_DEBIAN_SERVER_DESCRIPTION "tunefarm server: the tracker and the tuning service
trackerd brokers measurement batches from tuners to the device agents of a lab; tunerd runs tuning
jobs (search, cost model, embedded LLVM compiler) and keeps every measurement in its SQLite history.
For targets of other architectures, install their cross toolchains (g++-aarch64-linux-gnu).")
  list(APPEND TUNEFARM_DEB_TARGETS trackerd tunerd tunefarm-build-library tunefarm-model-import)
endif()
if(client IN_LIST TUNEFARM_DEB_COMPONENTS)
  install(TARGETS tune-client RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT client)
  set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME tunefarm-client)
  set(CPACK_DEBIAN_CLIENT_PACKAGE_SUGGESTS "tunefarm-server")
  set(CPACK_DEBIAN_CLIENT_DESCRIPTION "tunefarm client: tune-client, the command line of a tunefarm tuning service
Submits and watches tuning jobs, queries the best configs and records, and builds kernel
libraries and models from them. `build --from-records` runs tunefarm-build-library from
tunefarm-server when that is installed.")
  list(APPEND TUNEFARM_DEB_TARGETS tune-client)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL ${TUNEFARM_DEB_COMPONENTS})
set(CPACK_PACKAGE_NAME tunefarm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "tunefarm maintainers <tunefarm@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX ${TUNEFARM_DEB_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${TUNEFARM_DEB_ARCH})
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The shared libraries' packages from dpkg-shlibdeps (for a cross build it needs the :arm64 -dev
# packages installed, which that build needs anyway); the private runtime is found beside the programs.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
    ${TUNEFARM_DEB_PREFIX}/lib/tunefarm-agent ${TUNEFARM_DEB_PREFIX}/lib/tunefarm-server)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
include(CPack)

# The file of each package, as the DEB-DEFAULT naming writes it: the tests and the container
# files name them by this pattern.
set(TUNEFARM_DEB_FILES)
foreach(component ${TUNEFARM_DEB_COMPONENTS})
  list(APPEND TUNEFARM_DEB_FILES ${CPACK_PACKAGE_DIRECTORY}/tunefarm-${component}_${PROJECT_VERSION}_${TUNEFARM_DEB_ARCH}.deb)
endforeach()

# dpkg-shlibdeps looks up libraries for the architecture it is told is the host's.
add_custom_target(packages
  COMMAND ${CMAKE_COMMAND} -E env DEB_HOST_ARCH=${TUNEFARM_DEB_ARCH}
          ${CMAKE_CPACK_COMMAND} --config ${CMAKE_BINARY_DIR}/CPackConfig.cmake
  DEPENDS ${TUNEFARM_DEB_TARGETS}
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
  COMMENT "Building the Debian packages (${TUNEFARM_DEB_COMPONENTS}) for ${TUNEFARM_DEB_ARCH} into ${CPACK_PACKAGE_DIRECTORY}"
  USES_TERMINAL)
