// Short-lived samples folded into counts and the collection ledger, for sampled traces
// (trace_compactor.h; docs/sampling.md, "Short-lived samples").
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "format/record_codec.h"
#include "format/records.h"
#include "format/trace_format.h"
#include "format/varint.h"
#include "preload/write/trace_compactor.h"

namespace growtrace::preload {
namespace {

using format::RecordKind;
namespace records = format::records;

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
    records::Collection collection;
    if (!format::decode_after_dticks(c, collection)) return;
    const bool start = collection.phase == 0;
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
    template <class R>
    void record(const R& r) {
        if (room(format::record_size(r))) p += format::put_record(p, r);
    }
};

uint64_t find_start_ticks(const uint8_t* block, size_t size) {
    format::Cursor c(block, block + size);
    uint8_t kind;
    uint64_t length;
    while (c.byte(kind) && c.varint(length) && length <= c.remaining()) {
        format::Cursor p(c.position(), c.position() + length);
        c.skip(static_cast<size_t>(length));
        records::Process process;
        if (kind == static_cast<uint8_t>(RecordKind::Process) && format::decode(p, process)) return process.start_ticks;
    }
    return 0;
}

// A thread event's payload after its dticks, copied to `q` with the allocations it names (1 +
// age, 0 none: a TypeCreate's trailing field, a Container's list) renumbered by `age_now`
// (which never makes an age larger, so the copy is never longer). `count`: allocations so far.
template <typename AgeNow>
uint8_t* renumber_allocations(uint8_t kind, const uint8_t* rest, size_t size, uint64_t count, AgeNow age_now,
                              uint8_t* q) {
    auto holder = [&](uint64_t h) { return h && h - 1 < count ? 1 + age_now(h - 1) : h; };
    format::Cursor c(rest, rest + size);
    if (kind == static_cast<uint8_t>(RecordKind::TypeCreate)) {
        records::TypeCreate type;
        if (format::decode_after_dticks(c, type) && type.has_type_allocation) {
            type.type_allocation = holder(type.type_allocation);
            return format::put_payload_after_dticks(q, type);
        }
    } else if (kind == static_cast<uint8_t>(RecordKind::Container)) {
        records::Container container;
        if (format::decode_after_dticks(c, container)) {
            records::ContainerAllocation renumbered[records::Container::kMaxListed];
            size_t n = 0;
            container.allocations.for_each([&](const records::ContainerAllocation& block) {
                renumbered[n++].allocation = holder(block.allocation);
            });
            container.allocations = format::List<records::ContainerAllocation>::of(renumbered, n);
            return format::put_payload_after_dticks(q, container);
        }
    }
    memcpy(q, rest, size);
    return q + size;
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
        o.record(records::Time{static_cast<int64_t>(clock - shown)});
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
            records::Thread run;
            if (!format::decode(p, run)) return 0;
            clock = run.base_ticks;
            shown = clock;
            o.record(kind, payload, length);
        } else if (kind == static_cast<uint8_t>(RecordKind::Time)) {
            records::Time time;
            if (!format::decode(p, time)) return 0;
            clock += static_cast<uint64_t>(time.dticks);  // written before the next event kept, if any
        } else if (kind == static_cast<uint8_t>(RecordKind::AllocCompact)) {
            if (taken(++count)) continue;
            catch_up();
            o.record(kind, payload, length);
        } else if (kind == static_cast<uint8_t>(RecordKind::FreeCompact)) {
            records::FreeCompact free_record;
            if (!format::decode(p, free_record) || free_record.age >= count) return 0;
            if (taken(count - free_record.age)) continue;
            catch_up();
            o.record(records::FreeCompact{age_now(count, free_record.age)});
        } else if (is_thread_event_with_ticks(kind)) {
            // Its own dticks carries what the Time records taken out no longer do (every thread
            // event starts with its dticks, format/records.h).
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
    std::sort(order, order + removed, [&](uint32_t a, uint32_t b) {
        if (interval(a) != interval(b)) return interval(a) < interval(b);
        if (ledger_[a].stack != ledger_[b].stack) return ledger_[a].stack < ledger_[b].stack;
        return ledger_[a].size < ledger_[b].size;
    });
    // The record's three levels of groups (interval, stack, size) are produced as it is encoded:
    // a list's items come in order, from 0, once per pass (sizing, then writing), and each level
    // walks its range of the sorted samples from where its previous item ended.
    struct Walk {
        uint64_t begin = 0, end = 0, at = 0, previous = 0;
    };
    struct Groups {
        const LedgerEntry* ledger;
        const uint32_t* order;
        uint64_t origin;
        unsigned shift;
        uint64_t first;  // the first interval
        Walk level[3];   // intervals, stacks in an interval, sizes of a stack

        uint64_t interval(uint64_t k) const { return (ledger[order[k]].birth - origin) >> shift; }
        uint64_t key(uint64_t k, int depth) const {
            return depth == 0 ? interval(k) : depth == 1 ? ledger[order[k]].stack : ledger[order[k]].size;
        }
        bool same(uint64_t a, uint64_t b, int depth) const {
            for (int d = 0; d <= depth; ++d)
                if (key(a, d) != key(b, d)) return false;
            return true;
        }
        // The end of the group that begins at k, and how many groups [k, to) holds.
        uint64_t group_end(uint64_t k, uint64_t to, int depth) const {
            uint64_t j = k + 1;
            while (j < to && same(k, j, depth)) ++j;
            return j;
        }
        uint64_t count(uint64_t k, uint64_t to, int depth) const {
            uint64_t n = 0;
            for (; k < to; k = group_end(k, to, depth)) ++n;
            return n;
        }
        // The next group of `depth`: its key's step from the previous group's and its range.
        uint64_t next(size_t index, int depth, uint64_t& begin, uint64_t& end) {
            Walk& w = level[depth];
            if (index == 0) {
                w.at = w.begin;
                w.previous = depth == 0 ? first : 0;
            }
            begin = w.at;
            end = group_end(w.at, w.end, depth);
            const uint64_t step = key(begin, depth) - w.previous;
            w.previous = key(begin, depth);
            w.at = end;
            return step;
        }
        static Groups& of(const void* context) { return *static_cast<Groups*>(const_cast<void*>(context)); }

        static void sizes(const void* context, size_t i, records::SizeCount& out) {
            uint64_t begin, end;
            out.size_step = of(context).next(i, 2, begin, end);
            out.count = end - begin;
        }
        static void stacks(const void* context, size_t i, records::StackSizes& out) {
            Groups& g = of(context);
            uint64_t begin, end;
            out.stack_id_step = g.next(i, 1, begin, end);
            g.level[2] = {begin, end, begin, 0};
            out.sizes = format::List<records::SizeCount>::produced(g.count(begin, end, 2), context, sizes);
        }
        static void intervals(const void* context, size_t i, records::IntervalStacks& out) {
            Groups& g = of(context);
            uint64_t begin, end;
            out.interval_step = g.next(i, 0, begin, end);
            g.level[1] = {begin, end, begin, 0};
            out.stacks = format::List<records::StackSizes>::produced(g.count(begin, end, 1), context, stacks);
        }
    };
    Groups groups{ledger_, order, origin, shift, interval(order[0]), {}};
    groups.level[0] = {0, removed, 0, 0};
    const records::ShortLivedSamples record{
        last, shift, origin + (groups.first << shift),
        format::List<records::IntervalStacks>::produced(groups.count(0, removed, 0), &groups, Groups::intervals)};
    if (format::record_size(record) > static_cast<size_t>(end - out)) return false;
    out += format::put_record(out, record);
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
