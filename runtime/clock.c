/* clock.c — au_now_ns, the monotonic clock every layer of the runtime reads. */
#include <time.h>

#include "augur.h"

uint64_t au_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
