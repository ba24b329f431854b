  /* The codes every library tunefarm builds shares. */
  LIBNAME_OK = 0,
  LIBNAME_ERROR_NULL_ARGUMENT = 1,    /* a pointer argument is NULL */
  LIBNAME_ERROR_OUT_OF_MEMORY = 2,    /* scratch memory (a model's arena and weights) could not be allocated */
  LIBNAME_ERROR_INVALID_ARGUMENT = 3, /* e.g. a negative thread count */
