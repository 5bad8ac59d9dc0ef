// libgt_hidden_registry.so: a library nobody here "wrote" for the analyzer's sake, shipped the
// way most are: stripped, exporting its interface only. registry_remember() keeps every record
// it is given in two internal tables (an index and a journal), through internal functions that
// have no symbol once the library is stripped, so its growth shows up as two growing stacks
// whose innermost frames are unnamed. Used by library_grower.cpp.
#include <cstdlib>
#include <cstring>

namespace {

struct Node {
    Node* next;
    char payload[1];
};

Node* g_index = nullptr;
Node* g_journal = nullptr;

__attribute__((noinline)) Node* make_node(size_t payload_bytes, Node* next) {
    auto* n = static_cast<Node*>(std::malloc(sizeof(Node) + payload_bytes));
    n->next = next;
    std::memset(n->payload, 0x5a, payload_bytes);
    return n;
}

__attribute__((noinline)) void index_record(unsigned key) { g_index = make_node(96 + key % 64, g_index); }

__attribute__((noinline)) void journal_record(unsigned key) {
    // A second, unrelated internal path into the allocator.
    auto* entry = static_cast<Node*>(std::calloc(1, sizeof(Node) + 200 + key % 32));
    entry->next = g_journal;
    g_journal = entry;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void registry_remember(unsigned key) {
    index_record(key);
    journal_record(key);
}

extern "C" __attribute__((visibility("default"))) unsigned registry_size() {
    unsigned n = 0;
    for (Node* p = g_index; p; p = p->next) ++n;
    return n;
}
