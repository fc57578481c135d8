/* api.c — the thin code behind augur.h that belongs to no runtime module. */
#include "augur.h"

const char *au_strerror(int err)
{
  switch (err) {
  case 0:
    return "success";
  case AU_EINVAL:
    return "invalid argument";
  case AU_ENOMEM:
    return "out of memory";
  case AU_EBUSY:
    return "runtime is already running";
  case AU_ESHUTDOWN:
    return "runtime is shutting down";
  default:
    return "unknown error";
  }
}
