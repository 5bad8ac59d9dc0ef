#include "preload/capture/cfi_unwinder.h"

#include <elf.h>
#include <link.h>

#include <atomic>

#include "preload/capture/call_frame_info.h"

namespace growtrace::preload {
namespace {

// The table of rules by address: direct-mapped, lock-free. A slot is two words written one
// after the other, so a reader may see a key with another key's rule: the rule word carries a
// check of its key, and a mismatch reads as a miss.
struct Slot {
    std::atomic<uint64_t> key{0};
    std::atomic<uint64_t> rule{0};
};
// Slots follow addresses (the low bits, with the high ones folded in): the return addresses of
// one program's hot paths are few pages of code, and their rules stay on few pages of the
// table, which a scattering hash would spread over as many pages as there are frames.
constexpr int kTableBits = 15;  // 32768 slots, 512 KiB of which only the used pages are touched
Slot g_rules[1u << kTableBits];
std::atomic<bool> g_enabled{true};
constexpr uint64_t kMaxFrameBytes = 8u << 20;

size_t slot_of(uint64_t address) {
    return (address ^ (address >> kTableBits) ^ (address >> (2 * kTableBits))) & ((1u << kTableBits) - 1);
}
uint64_t check_of(uint64_t address) { return (address * 0xC2B2AE3D27D4EB4Full) >> 40; }

// Rule word: bits 0-1 the kind (0: none), 2 CFA from rbp, 3 rbp saved, 8-15 the return
// address's offset / 8, 16-23 rbp's offset / 8 (signed), 24-39 the CFA's offset, 40-63 the
// key's check. A rule whose offsets do not fit is kept as Unsupported.
uint64_t pack(FrameRule rule, uint64_t address) {
    uint64_t kind = static_cast<uint64_t>(rule.kind) + 1;
    bool fits = rule.cfa_offset >= 0 && rule.cfa_offset <= 0xffff && rule.ra_offset % 8 == 0 &&
                rule.ra_offset / 8 >= -128 && rule.ra_offset / 8 < 128 && rule.rbp_offset % 8 == 0 &&
                rule.rbp_offset / 8 >= -128 && rule.rbp_offset / 8 < 128;
    if (rule.kind == FrameRule::Step && !fits) kind = FrameRule::Unsupported + 1;
    uint64_t word = kind | (check_of(address) << 40);
    if (kind != FrameRule::Step + 1) return word;
    return word | (rule.cfa_from_rbp ? 4u : 0u) | (rule.rbp_saved ? 8u : 0u) |
           (static_cast<uint64_t>(static_cast<uint8_t>(rule.ra_offset / 8)) << 8) |
           (static_cast<uint64_t>(static_cast<uint8_t>(rule.rbp_offset / 8)) << 16) |
           (static_cast<uint64_t>(rule.cfa_offset) << 24);
}

FrameRule unpack(uint64_t word) {
    FrameRule rule;
    rule.kind = static_cast<FrameRule::Kind>((word & 3) - 1);
    rule.cfa_from_rbp = word & 4;
    rule.rbp_saved = word & 8;
    rule.ra_offset = static_cast<int8_t>((word >> 8) & 0xff) * 8;
    rule.rbp_offset = static_cast<int8_t>((word >> 16) & 0xff) * 8;
    rule.cfa_offset = static_cast<int32_t>((word >> 24) & 0xffff);
    return rule;
}

struct Lookup {
    uintptr_t address;
    FrameRule rule;
};

// Inside dl_iterate_phdr the module cannot be unloaded while its sections are read.
int rule_in_module(dl_phdr_info* info, size_t, void* data) {
    auto* lookup = static_cast<Lookup*>(data);
    const ElfW(Phdr)* eh_frame_hdr = nullptr;
    bool inside = false;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && lookup->address >= begin && lookup->address < begin + ph.p_memsz) inside = true;
        if (ph.p_type == PT_GNU_EH_FRAME) eh_frame_hdr = &ph;
    }
    if (!inside) return 0;
    if (eh_frame_hdr)
        lookup->rule = find_frame_rule(reinterpret_cast<const uint8_t*>(info->dlpi_addr + eh_frame_hdr->p_vaddr),
                                       lookup->address);
    return 1;
}

FrameRule rule_at(uint64_t address) {
    Slot& slot = g_rules[slot_of(address)];
    if (slot.key.load(std::memory_order_acquire) == address) {
        uint64_t word = slot.rule.load(std::memory_order_relaxed);
        if (word && (word >> 40) == check_of(address)) return unpack(word);
    }
    Lookup lookup{address, {}};
    dl_iterate_phdr(rule_in_module, &lookup);
    slot.rule.store(pack(lookup.rule, address), std::memory_order_relaxed);
    slot.key.store(address, std::memory_order_release);
    return lookup.rule;
}

std::atomic<uint32_t> g_generation{1};

}  // namespace

bool walk_memo_still_holds(const WalkMemo::Frame* frames, int from, int count) {
    for (int i = from; i + 1 < count; ++i) {
        const WalkMemo::Frame& callee = frames[i];
        const WalkMemo::Frame& caller = frames[i + 1];
        if (*reinterpret_cast<const uint64_t*>(caller.rsp + callee.ra_offset) != caller.ip) return false;
        if (callee.rbp_offset && *reinterpret_cast<const uint64_t*>(caller.rsp + callee.rbp_offset) != caller.rbp)
            return false;
    }
    return true;
}

namespace {

// The frame the walk is at. `lookup` is the address whose rule applies: the ip itself for the
// walk's own frame, the call's last byte (the return address - 1) for every caller.
struct Cursor {
    uint64_t ip, rsp, rbp, lookup;
};

// The walk of this thread's previous capture, while this walk may still meet it.
struct PreviousWalk {
    const WalkMemo::Frame* frames = nullptr;
    int count = 0;
    int next = 0;  // the first of its frames not below the cursor

    // The index of the previous walk's frame that is the cursor's frame, with every stack word
    // read from there up unchanged; -1 otherwise (and for good, once the stacks part).
    int meeting(const Cursor& at, int walked) {
        if (!frames) return -1;
        while (next < count && frames[next].rsp < at.rsp) ++next;
        if (next >= count || frames[next].rsp != at.rsp) return -1;
        const WalkMemo::Frame& f = frames[next];
        // An exact ip (the walk's own frame) only matches an exact ip.
        if (f.ip != at.ip || f.rbp != at.rbp || (next == 0) != (walked == 0)) return -1;
        if (walk_memo_still_holds(frames, next, count)) return next;
        frames = nullptr;
        return -1;
    }
};

// The walk under way becomes the previous one.
int settle(WalkMemo* memo, int count, bool complete, bool exact_first) {
    if (memo) {
        int next = memo->current ^ 1;
        memo->count[next] = count;
        memo->complete[next] = complete;
        memo->exact_first[next] = exact_first;
        memo->current = next;
    }
    return count;
}

// Moves the cursor to the caller's frame by `rule`, recording the frame in `out`. False where
// libunwind must judge: a stack that does not go up, a frame larger than a thread's whole
// default stack (an rbp the code used for something else), a zero return address.
bool step_to_caller(Cursor& at, const FrameRule& rule, WalkMemo::Frame& out) {
    uint64_t cfa = (rule.cfa_from_rbp ? at.rbp : at.rsp) + static_cast<int64_t>(rule.cfa_offset);
    if (cfa <= at.rsp || cfa - at.rsp > kMaxFrameBytes) return false;
    uint64_t return_address = *reinterpret_cast<const uint64_t*>(cfa + rule.ra_offset);
    out = {at.ip, at.rsp, at.rbp, rule.ra_offset, rule.rbp_saved ? rule.rbp_offset : 0};
    if (rule.rbp_saved) at.rbp = *reinterpret_cast<const uint64_t*>(cfa + rule.rbp_offset);
    if (return_address == 0) return false;
    at = {return_address, cfa, at.rbp, return_address - 1};
    return true;
}

}  // namespace

__attribute__((noinline)) int cfi_backtrace(uint64_t* ips, int max_frames, WalkMemo* memo, WalkStart start) {
    if (!g_enabled.load(std::memory_order_relaxed)) return -1;
    Cursor at;
    asm volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(at.ip), "=r"(at.rsp), "=r"(at.rbp));
    at.lookup = at.ip;
    const bool exact_first = !start.frame;
    if (start.frame) {
        uint64_t caller_rbp = *reinterpret_cast<const uint64_t*>(start.frame);
        at = {start.return_address, start.frame + 16, caller_rbp, start.return_address - 1};
    }
    uint32_t generation = g_generation.load(std::memory_order_acquire);
    PreviousWalk previous;
    WalkMemo::Frame scratch;
    WalkMemo::Frame* out = &scratch;
    if (memo) {
        if (memo->generation == generation && memo->complete[memo->current] &&
            memo->exact_first[memo->current] == exact_first) {
            previous.frames = memo->frames[memo->current];
            previous.count = memo->count[memo->current];
        }
        memo->generation = generation;
        out = memo->frames[memo->current ^ 1];
    }
    int count = 0;
    while (count < max_frames) {
        int met = previous.meeting(at, count);
        if (met >= 0) {
            int left = previous.count - met;
            int rest = left < max_frames - count ? left : max_frames - count;
            for (int i = 0; i < rest; ++i) {
                ips[count + i] = previous.frames[met + i].ip;
                out[count + i] = previous.frames[met + i];
            }
            return settle(memo, count + rest, rest == left, exact_first);
        }
        ips[count] = at.ip;
        FrameRule rule = rule_at(at.lookup);
        if (rule.kind == FrameRule::Outermost) {
            out[memo ? count : 0] = {at.ip, at.rsp, at.rbp, 0, 0};
            return settle(memo, count + 1, true, exact_first);
        }
        if (rule.kind != FrameRule::Step || !step_to_caller(at, rule, out[memo ? count : 0])) return -1;
        ++count;
    }
    return settle(memo, count, false, exact_first);
}

void cfi_forget_rules() {
    for (Slot& slot : g_rules) slot.key.store(0, std::memory_order_relaxed);
    g_generation.fetch_add(1, std::memory_order_release);
}

void cfi_set_enabled(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }
bool cfi_enabled() { return g_enabled.load(std::memory_order_relaxed); }

}  // namespace growtrace::preload
