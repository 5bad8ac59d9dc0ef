#include "preload/capture/call_frame_info.h"

#include <cstring>

namespace growtrace::preload {
namespace {

// DWARF register numbers on x86-64.
constexpr uint64_t kRbp = 6;
constexpr uint64_t kRsp = 7;

// Pointer encodings (DW_EH_PE_*): the low nibble is the format, the next three bits what the
// value is relative to.
constexpr uint8_t kOmit = 0xff;
constexpr uint8_t kPcRelative = 0x10;
constexpr uint8_t kDataRelative = 0x30;
constexpr uint8_t kIndirect = 0x80;
constexpr uint8_t kTableEncoding = kDataRelative | 0x0b;  // datarel sdata4: what linkers write

// A bounded reader over unwind bytes: any read past `end` leaves it failed.
struct Bytes {
    const uint8_t* at;
    const uint8_t* end;
    bool failed = false;

    bool has(size_t n) {
        if (failed || static_cast<size_t>(end - at) < n) failed = true;
        return !failed;
    }
    template <typename T>
    T fixed() {
        T value{};
        if (!has(sizeof value)) return value;
        memcpy(&value, at, sizeof value);
        at += sizeof value;
        return value;
    }
    uint64_t uleb() {
        uint64_t value = 0;
        for (int shift = 0; has(1); shift += 7) {
            uint8_t byte = *at++;
            if (shift < 64) value |= static_cast<uint64_t>(byte & 0x7f) << shift;
            if (!(byte & 0x80)) return value;
        }
        return 0;
    }
    int64_t sleb() {
        int64_t value = 0;
        int shift = 0;
        for (; has(1); shift += 7) {
            uint8_t byte = *at++;
            if (shift < 64) value |= static_cast<int64_t>(byte & 0x7f) << shift;
            if (!(byte & 0x80)) {
                if (shift + 7 < 64 && (byte & 0x40)) value |= -(static_cast<int64_t>(1) << (shift + 7));
                return value;
            }
        }
        return 0;
    }
    void skip(uint64_t n) {
        if (has(n)) at += n;
    }
    // A pointer in `encoding`; `data_base` for datarel. Indirect pointers are not followed
    // (only personality routines use them, which unwinding never needs).
    uint64_t pointer(uint8_t encoding, uint64_t data_base = 0) {
        if (encoding == kOmit) return 0;
        auto field = reinterpret_cast<uint64_t>(at);
        uint64_t value = 0;
        switch (encoding & 0x0f) {
            case 0x00: value = fixed<uint64_t>(); break;
            case 0x01: value = uleb(); break;
            case 0x02: value = fixed<uint16_t>(); break;
            case 0x03: value = fixed<uint32_t>(); break;
            case 0x04: value = fixed<uint64_t>(); break;
            case 0x09: value = static_cast<uint64_t>(sleb()); break;
            case 0x0a: value = static_cast<uint64_t>(static_cast<int64_t>(fixed<int16_t>())); break;
            case 0x0b: value = static_cast<uint64_t>(static_cast<int64_t>(fixed<int32_t>())); break;
            case 0x0c: value = fixed<uint64_t>(); break;
            default: failed = true; return 0;
        }
        switch (encoding & 0x70) {
            case 0x00: break;
            case kPcRelative: value += field; break;
            case kDataRelative: value += data_base; break;
            default: failed = true; return 0;  // textrel, funcrel, aligned: not on x86-64 Linux
        }
        if (encoding & kIndirect) value = 0;
        return value;
    }
};

// Where a register's value in the caller comes from.
struct RegisterRule {
    enum Kind : uint8_t { Same, AtCfa, Undefined, Other };
    Kind kind = Same;
    int64_t offset = 0;
};

struct Row {
    uint64_t cfa_register = kRsp;
    int64_t cfa_offset = 8;
    bool cfa_supported = true;
    RegisterRule rbp;
    RegisterRule ra;
};

constexpr int kMaxRememberedRows = 8;

// Runs call frame instructions until the row that covers `address`.
class CfaProgram {
public:
    CfaProgram(uint64_t code_align, int64_t data_align, uint64_t ra_register)
        : code_align_(code_align), data_align_(data_align), ra_register_(ra_register) {}

    // False where the instructions cannot be read; `location` is where the row starts.
    bool run(Bytes code, uintptr_t& location, uintptr_t address) {
        while (code.at < code.end && !code.failed) {
            uint8_t op = *code.at++;
            uint8_t low = op & 0x3f;
            switch (op >> 6) {
                case 1:
                    if (!advance(location, low * code_align_, address)) return true;
                    continue;
                case 2: set(low, RegisterRule{RegisterRule::AtCfa, static_cast<int64_t>(code.uleb()) * data_align_}); continue;
                case 3: set(low, initial_rule(low)); continue;
                default: break;
            }
            if (!extended(op, code, location, address)) return !code.failed;
        }
        return !code.failed;
    }

    void keep_as_initial() { initial_ = row_; }
    const Row& row() const { return row_; }

private:
    // False once the next row starts after `address`: the current one is the answer.
    bool advance(uintptr_t& location, uint64_t delta, uintptr_t address) {
        if (location + delta > address) return false;
        location += delta;
        return true;
    }

    RegisterRule initial_rule(uint64_t reg) const {
        if (reg == kRbp) return initial_.rbp;
        if (reg == ra_register_) return initial_.ra;
        return {};
    }

    void set(uint64_t reg, RegisterRule rule) {
        if (reg == kRbp) row_.rbp = rule;
        else if (reg == ra_register_) row_.ra = rule;
    }

    void define_cfa(uint64_t reg, int64_t offset) {
        row_.cfa_register = reg;
        row_.cfa_offset = offset;
        row_.cfa_supported = reg == kRsp || reg == kRbp;
    }

    // One instruction with a full opcode; false to stop (the row is reached or the code is bad).
    bool extended(uint8_t op, Bytes& code, uintptr_t& location, uintptr_t address) {
        switch (op) {
            case 0x00: return true;  // nop
            case 0x01: {             // set_loc
                uintptr_t next = code.pointer(fde_encoding_);
                if (next > address) return false;
                location = next;
                return true;
            }
            case 0x02: return advance(location, code.fixed<uint8_t>() * code_align_, address);
            case 0x03: return advance(location, code.fixed<uint16_t>() * code_align_, address);
            case 0x04: return advance(location, code.fixed<uint32_t>() * code_align_, address);
            case 0x05: {  // offset_extended
                uint64_t reg = code.uleb();
                set(reg, {RegisterRule::AtCfa, static_cast<int64_t>(code.uleb()) * data_align_});
                return true;
            }
            case 0x06: {  // restore_extended
                uint64_t reg = code.uleb();
                set(reg, initial_rule(reg));
                return true;
            }
            case 0x07: set(code.uleb(), {RegisterRule::Undefined, 0}); return true;
            case 0x08: set(code.uleb(), {RegisterRule::Same, 0}); return true;
            case 0x09: {  // register: the value is in another register
                uint64_t reg = code.uleb();
                code.uleb();
                set(reg, {RegisterRule::Other, 0});
                return true;
            }
            case 0x0a:  // remember_state
                if (remembered_ == kMaxRememberedRows) return code.failed = true, false;
                stack_[remembered_++] = row_;
                return true;
            case 0x0b:  // restore_state: the whole row, CFA included, as GCC's code expects
                if (remembered_ == 0) return code.failed = true, false;
                row_ = stack_[--remembered_];
                return true;
            case 0x0c: {  // def_cfa
                uint64_t reg = code.uleb();
                define_cfa(reg, static_cast<int64_t>(code.uleb()));
                return true;
            }
            case 0x0d: define_cfa(code.uleb(), row_.cfa_offset); return true;
            case 0x0e: row_.cfa_offset = static_cast<int64_t>(code.uleb()); return true;
            case 0x0f:  // def_cfa_expression
                code.skip(code.uleb());
                row_.cfa_supported = false;
                return true;
            case 0x10:    // expression
            case 0x16: {  // val_expression
                uint64_t reg = code.uleb();
                code.skip(code.uleb());
                set(reg, {RegisterRule::Other, 0});
                return true;
            }
            case 0x11: {  // offset_extended_sf
                uint64_t reg = code.uleb();
                set(reg, {RegisterRule::AtCfa, code.sleb() * data_align_});
                return true;
            }
            case 0x12: {  // def_cfa_sf
                uint64_t reg = code.uleb();
                define_cfa(reg, code.sleb() * data_align_);
                return true;
            }
            case 0x13: row_.cfa_offset = code.sleb() * data_align_; return true;
            case 0x14:    // val_offset
            case 0x15: {  // val_offset_sf
                uint64_t reg = code.uleb();
                if (op == 0x14) code.uleb();
                else code.sleb();
                set(reg, {RegisterRule::Other, 0});
                return true;
            }
            case 0x2e: code.uleb(); return true;  // GNU_args_size: no effect on the CFA
            case 0x2f: {                          // GNU_negative_offset_extended
                uint64_t reg = code.uleb();
                set(reg, {RegisterRule::AtCfa, -static_cast<int64_t>(code.uleb()) * data_align_});
                return true;
            }
            default: return code.failed = true, false;  // vendor opcodes we do not know
        }
    }

public:
    uint8_t fde_encoding_ = 0;

private:
    uint64_t code_align_;
    int64_t data_align_;
    uint64_t ra_register_;
    Row row_;
    Row initial_;
    Row stack_[kMaxRememberedRows];
    int remembered_ = 0;
};

bool fits32(int64_t value) { return value >= INT32_MIN && value <= INT32_MAX; }

FrameRule to_rule(const Row& row) {
    FrameRule rule;
    if (row.ra.kind == RegisterRule::Undefined) {
        rule.kind = FrameRule::Outermost;
        return rule;
    }
    if (!row.cfa_supported || row.ra.kind != RegisterRule::AtCfa) return rule;
    if (row.rbp.kind == RegisterRule::Other || row.rbp.kind == RegisterRule::Undefined) return rule;
    if (!fits32(row.cfa_offset) || !fits32(row.ra.offset) || !fits32(row.rbp.offset)) return rule;
    if (row.rbp.kind == RegisterRule::AtCfa && row.rbp.offset == 0) return rule;  // the caller's own word: not sane
    rule.kind = FrameRule::Step;
    rule.cfa_from_rbp = row.cfa_register == kRbp;
    rule.cfa_offset = static_cast<int32_t>(row.cfa_offset);
    rule.ra_offset = static_cast<int32_t>(row.ra.offset);
    rule.rbp_saved = row.rbp.kind == RegisterRule::AtCfa;
    rule.rbp_offset = static_cast<int32_t>(row.rbp.offset);
    return rule;
}

// An entry (CIE or FDE) of .eh_frame: its body after the length, and where it ends.
bool entry_at(const uint8_t* at, Bytes& body) {
    Bytes head{at, at + 12};
    uint32_t length = head.fixed<uint32_t>();
    if (length == 0 || length == 0xffffffff) return false;  // end marker; 64-bit DWARF is not made for x86-64 code
    body = Bytes{at + 4, at + 4 + length};
    return true;
}

struct Cie {
    uint64_t code_align = 1;
    int64_t data_align = -8;
    uint64_t ra_register = 16;
    uint8_t fde_encoding = 0;
    bool has_augmentation_data = false;
    bool signal_frame = false;
    const uint8_t* instructions = nullptr;
    const uint8_t* end = nullptr;
};

bool read_cie(const uint8_t* at, Cie& cie) {
    Bytes body{nullptr, nullptr};
    if (!entry_at(at, body)) return false;
    if (body.fixed<uint32_t>() != 0) return false;  // a CIE's id is 0 in .eh_frame
    uint8_t version = body.fixed<uint8_t>();
    if (version != 1 && version != 3) return false;
    const char* augmentation = reinterpret_cast<const char*>(body.at);
    size_t length = strnlen(augmentation, static_cast<size_t>(body.end - body.at));
    body.skip(length + 1);
    if (augmentation[0] != '\0' && augmentation[0] != 'z') return false;  // "eh" and older forms
    cie.code_align = body.uleb();
    cie.data_align = body.sleb();
    cie.ra_register = version == 1 ? body.fixed<uint8_t>() : body.uleb();
    if (augmentation[0] == 'z') {
        cie.has_augmentation_data = true;
        uint64_t data_length = body.uleb();
        const uint8_t* data_end = body.at + data_length;
        for (size_t i = 1; i < length && !body.failed; ++i) {
            switch (augmentation[i]) {
                case 'R': cie.fde_encoding = body.fixed<uint8_t>(); break;
                case 'P': body.pointer(body.fixed<uint8_t>()); break;
                case 'L': body.fixed<uint8_t>(); break;
                case 'S': cie.signal_frame = true; break;
                default: i = length; break;  // unknown: the data length lets us skip the rest
            }
        }
        body.at = data_end;
    }
    if (body.failed || body.at > body.end) return false;
    cie.instructions = body.at;
    cie.end = body.end;
    return true;
}

// The FDE whose function covers `address`, from the binary search table of .eh_frame_hdr.
const uint8_t* find_fde(const uint8_t* hdr, uintptr_t address) {
    if (hdr[0] != 1 || hdr[3] != kTableEncoding) return nullptr;
    Bytes fields{hdr + 4, hdr + 4 + 16};
    fields.pointer(hdr[1], reinterpret_cast<uint64_t>(hdr));  // .eh_frame itself: not needed
    uint64_t count = fields.pointer(hdr[2], reinterpret_cast<uint64_t>(hdr));
    if (fields.failed || count == 0) return nullptr;
    const auto* table = reinterpret_cast<const int32_t*>(fields.at);
    auto base = reinterpret_cast<intptr_t>(hdr);
    auto target = static_cast<intptr_t>(address);
    // The last entry whose function starts at or before the address.
    uint64_t low = 0, high = count;
    while (high - low > 1) {
        uint64_t middle = low + (high - low) / 2;
        if (base + table[2 * middle] <= target) low = middle;
        else high = middle;
    }
    if (base + table[2 * low] > target) return nullptr;
    return reinterpret_cast<const uint8_t*>(base + table[2 * low + 1]);
}

}  // namespace

FrameRule rule_from_instructions(const uint8_t* cie_instructions, const uint8_t* cie_end,
                                 const uint8_t* fde_instructions, const uint8_t* fde_end, uint64_t code_align,
                                 int64_t data_align, uint64_t ra_register, uintptr_t function_begin,
                                 uintptr_t address) {
    CfaProgram program(code_align, data_align, ra_register);
    uintptr_t location = function_begin;
    if (!program.run(Bytes{cie_instructions, cie_end}, location, UINTPTR_MAX)) return {};
    program.keep_as_initial();
    location = function_begin;
    if (!program.run(Bytes{fde_instructions, fde_end}, location, address)) return {};
    return to_rule(program.row());
}

FrameRule find_frame_rule(const uint8_t* eh_frame_hdr, uintptr_t address) {
    const uint8_t* fde = find_fde(eh_frame_hdr, address);
    Bytes body{nullptr, nullptr};
    if (!fde || !entry_at(fde, body)) return {};
    const uint8_t* id_field = body.at;
    uint32_t cie_offset = body.fixed<uint32_t>();
    if (cie_offset == 0) return {};  // a CIE where an FDE should be
    Cie cie;
    if (!read_cie(id_field - cie_offset, cie) || cie.signal_frame) return {};
    uintptr_t begin = body.pointer(cie.fde_encoding);
    uintptr_t range = body.pointer(cie.fde_encoding & 0x0f);
    if (body.failed || address < begin || address - begin >= range) return {};
    if (cie.has_augmentation_data) body.skip(body.uleb());
    if (body.failed) return {};
    CfaProgram program(cie.code_align, cie.data_align, cie.ra_register);
    program.fde_encoding_ = cie.fde_encoding;
    uintptr_t location = begin;
    if (!program.run(Bytes{cie.instructions, cie.end}, location, UINTPTR_MAX)) return {};
    program.keep_as_initial();
    location = begin;
    if (!program.run(Bytes{body.at, body.end}, location, address)) return {};
    return to_rule(program.row());
}

}  // namespace growtrace::preload
