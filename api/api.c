/* api.c — the thin code behind augur.h that belongs to no runtime module. */
#include "augur.h"

const char *au_strerror(int err)
{
  static const struct {
    int code;
    const char *text;
  } table[] = {
      {0, "success"},
      {AU_EINVAL, "invalid argument"},
      {AU_ENOMEM, "out of memory"},
      {AU_EBUSY, "runtime is already running"},
      {AU_ESHUTDOWN, "runtime is shutting down"},
      {AU_EAGAIN, "values are not local yet (return AU_WAIT from the step)"},
      {AU_EDEADLK, "workers wait for something that cannot arrive"},
      {AU_ERANGE, "key outside the table"},
      {AU_ENOENT, "no actor at that port"},
      {AU_EPROTO, "protocol error, or refused by a peer"},
      {AU_ETIMEDOUT, "the cluster did not form in time"},
      {AU_ENODE, "a node of the cluster was lost"},
      {AU_EIO, "input/output error (a file)"},
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
    if (table[i].code == err) return table[i].text;
  return "unknown error";
}
