// The prefetch and atomic helpers are inline, in the header; the table allocator is here, so that
// every module that inlines a keyed table calls the same code.
#include "CPaceSupport.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static const size_t mappedTableBytes = 16 * 1024;

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

bool pace_shrink_table_in_place(void *table, size_t bytes, size_t newBytes) {
#if defined(__linux__)
  if (bytes >= mappedTableBytes && newBytes >= mappedTableBytes) {
    // Give back the whole pages past the ones still used; `munmap` of `newBytes` frees the
    // rest, rounding up to the page as `mmap` did.
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t kept = (newBytes + page - 1) / page * page;
    if (kept < bytes) munmap((char *)table + kept, bytes - kept);
    return true;
  }
#endif
  (void)table;
  (void)bytes;
  (void)newBytes;
  return false;
}

#if defined(__linux__)
void pace_shard_lock_contended(uint32_t *word) {
  // Taken from here on as 2, "someone may sleep", so that the thread that gives it back wakes one:
  // a thread taking it here cannot know whether others still sleep.
  while (__atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) != 0) {
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
  }
}

void pace_shard_lock_wake(uint32_t *word) {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
#endif
