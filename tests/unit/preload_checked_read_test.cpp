// Checked reads (preload/cpython/checked_read.h): the library's reads of objects it did
// not allocate never fault; memory that cannot be read makes the read fail instead.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "preload/cpython/checked_read.h"

namespace growtrace::preload::python {
namespace {

// Two pages: the first readable, the second not.
struct GuardedPages {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    char* base =
        static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    GuardedPages() {
        if (base != MAP_FAILED) mprotect(base + page, page, PROT_NONE);
    }
    ~GuardedPages() {
        if (base != MAP_FAILED) munmap(base, 2 * page);
    }
};

TEST(CheckedRead, CopiesReadableMemory) {
    ASSERT_TRUE(checked_reads_work()) << "process_vm_readv is refused here";
    const char text[] = "growtrace";
    char out[sizeof text] = {};
    EXPECT_TRUE(copy_checked(text, out, sizeof text));
    EXPECT_STREQ(out, text);
    uint64_t word = 0x1122334455667788, field = 0;
    EXPECT_TRUE(read_field(&word, 0, field));
    EXPECT_EQ(field, word);
}

TEST(CheckedRead, UnreadableMemoryFailsInsteadOfFaulting) {
    GuardedPages pages;
    ASSERT_NE(pages.base, MAP_FAILED);
    char out[64];
    EXPECT_FALSE(copy_checked(pages.base + pages.page, out, 8)) << "a PROT_NONE page";
    EXPECT_FALSE(copy_checked(reinterpret_cast<const void*>(0x10), out, 8)) << "a pointer to nothing";
    EXPECT_FALSE(copy_checked(nullptr, out, 8));
    uint64_t field = 0;
    EXPECT_FALSE(read_field(static_cast<const void*>(nullptr), 8, field));
    // Straddling the end of the readable page: all or nothing.
    EXPECT_FALSE(copy_checked(pages.base + pages.page - 4, out, 8));
}

TEST(CheckedRead, PrefixStopsAtTheFirstUnreadablePage) {
    GuardedPages pages;
    ASSERT_NE(pages.base, MAP_FAILED);
    char* tail = pages.base + pages.page - 5;
    memcpy(tail, "abcd", 5);
    char out[64];
    EXPECT_EQ(copy_readable_prefix(tail, out, sizeof out), 5u);
    EXPECT_STREQ(out, "abcd");
    EXPECT_EQ(copy_readable_prefix(pages.base + pages.page, out, sizeof out), 0u);
    EXPECT_EQ(copy_readable_prefix(pages.base, out, sizeof out), sizeof out);
}

TEST(CheckedRead, LeavesErrnoAsItWas) {
    char out[8];
    errno = 1234;
    EXPECT_FALSE(copy_checked(reinterpret_cast<const void*>(0x10), out, sizeof out));
    EXPECT_EQ(errno, 1234);
}

}  // namespace
}  // namespace growtrace::preload::python
