/* log_probe: makes libfusedcomm log one warning (a rejected call), so that a test
 * can run it with FC_DEBUG / FC_DEBUG_FILE set in a fresh process (the library reads
 * them once per process). */
#include <stdio.h>

#include "fusedcomm.h"

int main(void) {
  fcResult_t r = fcGetVersion(NULL);
  printf("%d %s\n", (int)r, fcGetLastError(NULL));
  return r == fcInvalidArgument ? 0 : 1;
}
