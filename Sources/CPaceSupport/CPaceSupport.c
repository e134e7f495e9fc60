// The prefetch and atomic helpers are inline, in the header; the table allocator is here, so that
// every module that inlines a keyed table calls the same code.
#include "CPaceSupport.h"

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

static const size_t mappedTableBytes = 256 * 1024;

size_t pace_mapped_table_bytes(void) {
  return mappedTableBytes;
}

void *pace_allocate_table(size_t bytes) {
#if defined(__linux__)
  if (bytes >= mappedTableBytes) {
    // Fresh anonymous pages are zero.
    void *pages = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return pages == MAP_FAILED ? NULL : pages;
  }
#endif
  void *memory = NULL;
  if (posix_memalign(&memory, 64, bytes) != 0) return NULL;
  memset(memory, 0, bytes);
  return memory;
}

void pace_free_table(void *table, size_t bytes) {
#if defined(__linux__)
  if (bytes >= mappedTableBytes) {
    munmap(table, bytes);
    return;
  }
#endif
  free(table);
}
