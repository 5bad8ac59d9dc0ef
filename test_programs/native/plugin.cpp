// libgt_plugin.so: a shared library loaded with dlopen by dlopen_user. plugin_remember keeps
// every block it allocates (1500 bytes each unless plugin_set_block_size says otherwise,
// chained through their first bytes so that no other allocation is involved) until the
// process exits.
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace {

size_t kBlockSize = 1500;

struct Block {
    Block* next;
};

Block* g_kept = nullptr;
unsigned long g_count = 0;

}  // namespace

extern "C" __attribute__((visibility("default"))) void plugin_set_block_size(unsigned long bytes) {
    if (bytes >= sizeof(Block)) kBlockSize = bytes;
}

extern "C" __attribute__((noinline, visibility("default"))) void plugin_remember(unsigned count) {
    for (unsigned i = 0; i < count; ++i) {
        void* memory = malloc(kBlockSize);  // LINE-MARK: plugin_remember
        memset(memory, 7, kBlockSize);
        Block* block = static_cast<Block*>(memory);
        block->next = g_kept;
        g_kept = block;
        ++g_count;
    }
}

extern "C" __attribute__((visibility("default"))) unsigned long plugin_kept_count() { return g_count; }
