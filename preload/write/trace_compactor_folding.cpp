// Short-lived samples folded into counts and the collection ledger, for sampled traces
// (trace_compactor.h; docs/sampling.md, "Short-lived samples").
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "format/trace_format.h"
#include "format/varint.h"
#include "preload/write/trace_compactor.h"

namespace growtrace::preload {
namespace {

using format::RecordKind;

bool is_thread_event_with_ticks(uint8_t kind) {
    return kind == static_cast<uint8_t>(RecordKind::CacheCreate) ||
           kind == static_cast<uint8_t>(RecordKind::CacheInsert) ||
           kind == static_cast<uint8_t>(RecordKind::TypeCreate) ||
           kind == static_cast<uint8_t>(RecordKind::Collection) ||
           kind == static_cast<uint8_t>(RecordKind::Container);
}

}  // namespace

// --- short-lived samples (sampled traces) ---
//
// Most samples of a busy program are freed a few milliseconds after they were made: written one
// by one, each is an AllocCompact, a FreeCompact and often a Time record or two. Counted instead
// per stack and size in one record per block, they cost a few bytes per stack. The reader only
// loses what it never uses from them: the thread and the exact times within an interval in which
// they were both born and dead (docs/sampling.md, "Short-lived samples").

TraceCompactor::LedgerEntry* TraceCompactor::ledger_entry(uint64_t id) {
    if (!ledger_ || id <= ledger_base_ || id - ledger_base_ > kLedgerEntries) return nullptr;
    return &ledger_[id - ledger_base_ - 1];
}

void TraceCompactor::keep_allocation(uint64_t id) {
    if (LedgerEntry* e = ledger_entry(id)) e->state = LedgerState::Kept;
}

bool TraceCompactor::collecting(uint64_t tid) const {
    if (collecting_untracked_) return true;
    for (uint64_t t : collecting_)
        if (t && t == tid) return true;
    return false;
}

void TraceCompactor::note_collection(const uint8_t* rest, size_t size) {
    format::Cursor c(rest, rest + size);
    uint64_t phase;
    if (!c.varint(phase)) return;
    const bool start = phase == 0;
    for (uint64_t& t : collecting_)
        if (t == run_tid_) {
            if (!start) t = 0;
            return;
        }
    if (!start) {
        if (collecting_untracked_) --collecting_untracked_;
        return;
    }
    for (uint64_t& t : collecting_)
        if (!t) {
            t = run_tid_;
            return;
        }
    ++collecting_untracked_;
}

uint64_t TraceCompactor::removed_up_to(uint64_t id, uint64_t entries, uint64_t removed) const {
    if (id <= ledger_base_) return 0;
    const uint64_t index = id - ledger_base_ - 1;
    return index < entries ? ledger_[index].removed_before : removed;
}

void TraceCompactor::start_ledger() { ledger_base_ = allocations_; }

namespace {

// The rewritten block: bounded, and failed for good once something did not fit.
struct FoldOutput {
    uint8_t* p;
    uint8_t* end;
    bool ok = true;

    bool room(size_t n) {
        if (static_cast<size_t>(end - p) < n) ok = false;
        return ok;
    }
    void record(uint8_t kind, const uint8_t* payload, size_t size) {
        if (!room(1 + format::kMaxVarintBytes + size)) return;
        *p++ = kind;
        p = format::put_varint(p, size);
        memcpy(p, payload, size);
        p += size;
    }
    void varint(uint64_t v) {
        if (room(format::kMaxVarintBytes)) p = format::put_varint(p, v);
    }
};

uint64_t find_start_ticks(const uint8_t* block, size_t size) {
    format::Cursor c(block, block + size);
    uint8_t kind;
    uint64_t length, pid, ppid, start;
    while (c.byte(kind) && c.varint(length) && length <= c.remaining()) {
        format::Cursor p(c.position(), c.position() + length);
        c.skip(static_cast<size_t>(length));
        if (kind == static_cast<uint8_t>(RecordKind::Process) && p.varint(pid) && p.varint(ppid) && p.varint(start))
            return start;
    }
    return 0;
}


// A thread event's payload after its dticks, copied to `q` with the allocations it names (1 +
// age, 0 none: a TypeCreate's last field, a Container's leading ones) renumbered by `age_now`
// (which never makes an age larger, so the copy is never longer). `count`: allocations so far.
template <typename AgeNow>
uint8_t* renumber_allocations(uint8_t kind, const uint8_t* rest, size_t size, uint64_t count, AgeNow age_now,
                              uint8_t* q) {
    format::Cursor c(rest, rest + size);
    auto holder = [&](uint64_t h) { return h && h - 1 < count ? 1 + age_now(h - 1) : h; };
    auto copy = [&](const uint8_t* from, const uint8_t* to) {
        memcpy(q, from, static_cast<size_t>(to - from));
        q += to - from;
    };
    uint8_t* const start = q;
    uint64_t v, h;
    if (kind == static_cast<uint8_t>(RecordKind::TypeCreate)) {
        const uint8_t* text;
        size_t n;
        if (c.varint(v) && c.varint(v) && c.varint(v) && c.bytes(text, n) && c.bytes(text, n) && c.bytes(text, n)) {
            const uint8_t* field = c.position();
            if (c.varint(h)) {
                copy(rest, field);
                q = format::put_varint(q, holder(h));
                copy(c.position(), rest + size);
                return q;
            }
        }
    } else if (kind == static_cast<uint8_t>(RecordKind::Container) && c.varint(v) && v <= 64) {
        q = format::put_varint(q, v);
        bool whole = true;
        for (uint64_t i = 0; i < v && whole; ++i) {
            whole = c.varint(h);
            if (whole) q = format::put_varint(q, holder(h));
        }
        if (whole) {
            copy(c.position(), rest + size);
            return q;
        }
        q = start;
    }
    copy(rest, rest + size);
    return q;
}

}  // namespace

size_t TraceCompactor::fold_short_lived(const uint8_t* block, size_t size, uint8_t* out, size_t out_capacity) {
    const uint64_t written = allocations_ - ledger_base_;
    const uint64_t entries = ledger_ ? std::min<uint64_t>(written, kLedgerEntries) : 0;
    if (!origin_ticks_) origin_ticks_ = find_start_ticks(block, size);
    uint64_t last = 0, freed = 0;
    for (uint64_t i = 0; i < entries; ++i)
        if (ledger_[i].state == LedgerState::Freed) {
            last = std::max(last, ledger_[i].death);
            ++freed;
        }
    size_t result = 0;
    if (freed && origin_ticks_ && sampled_) {
        // The narrowest windows a reader can have once the trace reaches `last`: a sample born
        // and dead within one of them (aligned on the trace's start) is in one window of every
        // reader, as its two records would have put it.
        const uint64_t origin = origin_ticks_;
        const uint64_t span = last > origin ? last - origin : 0;
        unsigned shift = 0;
        while ((span >> shift) >= format::kShortLivedReaderWindows) ++shift;
        uint64_t removed = 0;
        for (uint64_t i = 0; i < entries; ++i) {
            LedgerEntry& e = ledger_[i];
            const bool take = e.state == LedgerState::Freed && e.birth >= origin && e.death >= e.birth &&
                              ((e.birth - origin) >> shift) == ((e.death - origin) >> shift) &&
                              !(exit_ticks_ && e.death > exit_ticks_);  // the reader drops frees after the exit
            if (take) ledger_order_[removed++] = static_cast<uint32_t>(i);
            e.state = take ? LedgerState::Freed : LedgerState::Kept;
            e.removed_before = static_cast<uint32_t>(removed);
        }
        if (removed) result = write_folded(block, size, out, out_capacity, entries, removed, shift, last);
        if (result) {
            // Numbers handed out in this block now count only the allocations written.
            for (size_t i = 0; live_.slots && i <= live_.mask; ++i) {
                Entry& e = live_.slots[i];
                if (e.addr && e.id > ledger_base_) e.id -= removed_up_to(e.id, entries, removed);
            }
            allocations_ -= removed;
            folded_ += removed;
        }
    }
    start_ledger();
    return result;
}

size_t TraceCompactor::write_folded(const uint8_t* block, size_t size, uint8_t* out, size_t out_capacity,
                                    uint64_t entries, uint64_t removed, unsigned shift, uint64_t last) {
    auto taken = [&](uint64_t id) {
        return id > ledger_base_ && id - ledger_base_ <= entries && ledger_[id - ledger_base_ - 1].state == LedgerState::Freed;
    };
    // An age (as in FreeCompact) counted at allocation `count`, as the block now numbers them.
    auto age_now = [&](uint64_t count, uint64_t age) {
        return age - (removed_up_to(count, entries, removed) - removed_up_to(count - age, entries, removed));
    };
    FoldOutput o{out, out + out_capacity};
    format::Cursor c(block, block + size);
    uint64_t count = ledger_base_;
    // The run's clock as the block had it, and as what is written so far gives it.
    uint64_t clock = 0, shown = 0;
    auto catch_up = [&] {
        if (shown == clock) return;
        uint8_t t[format::kMaxVarintBytes];
        o.record(static_cast<uint8_t>(RecordKind::Time), t,
                 static_cast<size_t>(format::put_varint(t, format::zigzag_encode(static_cast<int64_t>(clock - shown))) - t));
        shown = clock;
    };
    uint8_t rebased[kMaxRebasedRecord + 2 * format::kMaxVarintBytes];
    while (!c.at_end()) {
        uint8_t kind;
        uint64_t length;
        if (!c.byte(kind) || !c.varint(length) || length > c.remaining()) return 0;
        const uint8_t* payload = c.position();
        format::Cursor p(payload, payload + length);
        c.skip(static_cast<size_t>(length));
        if (kind == static_cast<uint8_t>(RecordKind::Thread)) {
            uint64_t tid;
            if (!p.varint(tid) || !p.varint(clock)) return 0;
            shown = clock;
            o.record(kind, payload, length);
        } else if (kind == static_cast<uint8_t>(RecordKind::Time)) {
            int64_t d;
            if (!p.svarint(d)) return 0;
            clock += static_cast<uint64_t>(d);  // written before the next event kept, if any
        } else if (kind == static_cast<uint8_t>(RecordKind::AllocCompact)) {
            if (taken(++count)) continue;
            catch_up();
            o.record(kind, payload, length);
        } else if (kind == static_cast<uint8_t>(RecordKind::FreeCompact)) {
            uint64_t age;
            if (!p.varint(age) || age >= count) return 0;
            if (taken(count - age)) continue;
            catch_up();
            uint8_t b[format::kMaxVarintBytes];
            o.record(kind, b, static_cast<size_t>(format::put_varint(b, age_now(count, age)) - b));
        } else if (is_thread_event_with_ticks(kind)) {
            // Its own dticks carries what the Time records taken out no longer do.
            int64_t d;
            if (!p.svarint(d) || p.remaining() > kMaxRebasedRecord) return 0;
            clock += static_cast<uint64_t>(d);
            uint8_t* q = format::put_varint(rebased, format::zigzag_encode(static_cast<int64_t>(clock - shown)));
            q = renumber_allocations(kind, p.position(), p.remaining(), count,
                                     [&](uint64_t age) { return age_now(count, age); }, q);
            o.record(kind, rebased, static_cast<size_t>(q - rebased));
            shown = clock;
        } else {
            o.record(kind, payload, length);
        }
    }
    if (count != allocations_) return 0;  // not the block the ledger describes: leave it as it is
    // The run may go on in the next block (merged order cuts blocks in the middle of runs).
    catch_up();
    if (!o.ok || !write_short_lived(o.p, o.end, removed, shift, last)) return 0;
    return static_cast<size_t>(o.p - out);
}

bool TraceCompactor::write_short_lived(uint8_t*& out, uint8_t* end, uint64_t removed, unsigned shift, uint64_t last) {
    const uint64_t origin = origin_ticks_;
    uint32_t* const order = ledger_order_;
    auto interval = [&](uint32_t i) { return (ledger_[i].birth - origin) >> shift; };
    auto same_interval = [&](uint32_t a, uint32_t b) { return interval(a) == interval(b); };
    auto same_stack = [&](uint32_t a, uint32_t b) { return same_interval(a, b) && ledger_[a].stack == ledger_[b].stack; };
    auto same_size = [&](uint32_t a, uint32_t b) { return same_stack(a, b) && ledger_[a].size == ledger_[b].size; };
    std::sort(order, order + removed, [&](uint32_t a, uint32_t b) {
        if (!same_interval(a, b)) return interval(a) < interval(b);
        if (ledger_[a].stack != ledger_[b].stack) return ledger_[a].stack < ledger_[b].stack;
        return ledger_[a].size < ledger_[b].size;
    });
    // The end of the group that begins at i, and how many groups [i, to) holds.
    auto group_end = [&](uint64_t i, uint64_t to, auto same) {
        uint64_t j = i + 1;
        while (j < to && same(order[i], order[j])) ++j;
        return j;
    };
    auto groups = [&](uint64_t i, uint64_t to, auto same) {
        uint64_t n = 0;
        for (; i < to; i = group_end(i, to, same)) ++n;
        return n;
    };
    // The payload goes after room for the kind and the longest length, and is moved into place.
    constexpr size_t kHead = 1 + format::kMaxVarintBytes;
    if (static_cast<size_t>(end - out) < kHead) return false;
    FoldOutput o{out + kHead, end};
    const uint64_t first = interval(order[0]);
    o.varint(last);
    o.varint(shift);
    o.varint(origin + (first << shift));
    o.varint(groups(0, removed, same_interval));
    for (uint64_t i = 0, previous = first; i < removed;) {
        const uint64_t i_end = group_end(i, removed, same_interval);
        o.varint(interval(order[i]) - previous);
        previous = interval(order[i]);
        o.varint(groups(i, i_end, same_stack));
        for (uint64_t k = i, previous_stack = 0; k < i_end;) {
            const uint64_t k_end = group_end(k, i_end, same_stack);
            o.varint(ledger_[order[k]].stack - previous_stack);
            previous_stack = ledger_[order[k]].stack;
            o.varint(groups(k, k_end, same_size));
            for (uint64_t m = k, previous_size = 0; m < k_end;) {
                const uint64_t m_end = group_end(m, k_end, same_size);
                o.varint(ledger_[order[m]].size - previous_size);
                previous_size = ledger_[order[m]].size;
                o.varint(m_end - m);
                m = m_end;
            }
            k = k_end;
        }
        i = i_end;
    }
    if (!o.ok) return false;
    const size_t payload = static_cast<size_t>(o.p - (out + kHead));
    out[0] = static_cast<uint8_t>(RecordKind::ShortLivedSamples);
    uint8_t* body = format::put_varint(out + 1, payload);
    memmove(body, out + kHead, payload);
    out = body + payload;
    return true;
}

void TraceCompactor::reset() {
    for (uint64_t& t : collecting_) t = 0;
    collecting_untracked_ = 0;
    origin_ticks_ = 0;
    ledger_base_ = 0;
    for (CacheState& k : caches_) k = CacheState{};
    for (HeldThread& t : held_) t.depth = 0;
    held_count_ = 0;
    live_.clear();
    allocations_ = 0;
    frees_written_ = weightless_ = untraced_frees_ = inferred_frees_ = folded_ = 0;
    recorded_allocations_ = recorded_frees_ = lost_events_ = 0;
    run_ticks_ = run_tid_ = 0;
    out_tid_ = 0;
    for (OpenContexts& c : contexts_) c = OpenContexts{};
    threads_with_context_ = contexts_untracked_ = 0;
    written_ticks_ = 0;
    exit_ticks_ = 0;
}

}  // namespace growtrace::preload
