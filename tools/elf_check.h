// Can LD_PRELOAD reach a program? Only if the dynamic loader runs for it: an ELF executable
// with a PT_INTERP program header. A statically linked executable (no PT_DYNAMIC) and a
// static-pie one (PT_DYNAMIC but no PT_INTERP and no DT_SONAME) never load ld.so. A script
// is loaded through the interpreter named on its #! line, so that is the file to check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace growtrace::cli {

enum class Linkage {
    Dynamic,   // PT_INTERP, or a shared object run directly (e.g. ld.so ./prog)
    Static,    // no PT_INTERP: static or static-pie
    NotElf,    // neither ELF nor #! script: the kernel refuses it, execvp falls back to /bin/sh
    Unreadable,
};

struct ElfInfo {
    Linkage linkage = Linkage::Unreadable;
    bool elf64 = false;        // ELFCLASS64
    uint16_t machine = 0;      // e_machine
    std::string interpreter;   // PT_INTERP contents, if any
    std::string error;         // why it is Unreadable
};

// Reads the ELF header and program headers of `path`.
ElfInfo inspect_elf(const std::string& path);

// The image the kernel actually loads when `path` is executed: `path` itself, or for a
// script the interpreter of its #! line (followed through nested scripts, and through
// `#!/usr/bin/env NAME` to NAME on $PATH, since env execs it with the same environment).
struct LoadedImage {
    std::string path;                // the ELF file (or last file reached)
    std::vector<std::string> chain;  // scripts and interpreters passed through, in order
    std::string error;               // non-empty if the chain could not be followed
};
LoadedImage resolve_loaded_image(const std::string& path);

// Does this process's own ELF class and machine match `info` (can our 64-bit x86-64
// libgrowtrace.so be loaded into it)?
bool matches_own_architecture(const ElfInfo& info);

}  // namespace growtrace::cli
