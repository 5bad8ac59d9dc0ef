#include "elf_check.h"

#include <elf.h>
#include <string.h>

#include <cerrno>
#include <fstream>

#include "launcher.h"

namespace growtrace::cli {

namespace {

// Reads `size` bytes at `offset`; false on short read.
bool read_at(std::ifstream& in, uint64_t offset, void* out, size_t size) {
    in.clear();
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(static_cast<char*>(out), static_cast<std::streamsize>(size));
    return in.gcount() == static_cast<std::streamsize>(size);
}

// The class-independent part of ELF parsing, instantiated for Elf32 and Elf64.
template <typename Ehdr, typename Phdr, typename Dyn>
void inspect_program_headers(std::ifstream& in, ElfInfo& info) {
    Ehdr header;
    if (!read_at(in, 0, &header, sizeof header)) {
        info.linkage = Linkage::Unreadable;
        info.error = "truncated ELF header";
        return;
    }
    info.machine = header.e_machine;
    if (header.e_phentsize != sizeof(Phdr) || header.e_phnum == 0) {
        // No program headers: not something the kernel would run.
        info.linkage = Linkage::Unreadable;
        info.error = "no program headers";
        return;
    }
    bool has_dynamic = false;
    Phdr dynamic{};
    for (unsigned i = 0; i < header.e_phnum; ++i) {
        Phdr ph;
        if (!read_at(in, header.e_phoff + uint64_t{i} * sizeof(Phdr), &ph, sizeof ph)) {
            info.linkage = Linkage::Unreadable;
            info.error = "truncated program headers";
            return;
        }
        if (ph.p_type == PT_INTERP && ph.p_filesz > 0 && ph.p_filesz < 4096) {
            std::string interp(ph.p_filesz, '\0');
            if (read_at(in, ph.p_offset, interp.data(), interp.size())) {
                info.interpreter = interp.c_str();  // drop the terminating NUL
            }
            info.linkage = Linkage::Dynamic;
        } else if (ph.p_type == PT_DYNAMIC) {
            has_dynamic = true;
            dynamic = ph;
        }
    }
    if (info.linkage == Linkage::Dynamic) return;
    info.linkage = Linkage::Static;
    if (!has_dynamic) return;
    // PT_DYNAMIC without PT_INTERP: either static-pie (still never runs ld.so) or a shared
    // object started directly, such as the dynamic loader itself; only the latter has a soname.
    for (uint64_t off = 0; off + sizeof(Dyn) <= dynamic.p_filesz; off += sizeof(Dyn)) {
        Dyn entry;
        if (!read_at(in, dynamic.p_offset + off, &entry, sizeof entry)) break;
        if (entry.d_tag == DT_NULL) break;
        if (entry.d_tag == DT_SONAME) {
            info.linkage = Linkage::Dynamic;
            break;
        }
    }
}

// Splits a #! line into interpreter and its single optional argument, as Linux does.
bool read_shebang(const std::string& path, std::string& interpreter, std::string& argument) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    std::string line;
    char c;
    for (size_t i = 0; i < 256 && in.get(c) && c != '\n'; ++i) line += c;
    if (line.size() < 2 || line[0] != '#' || line[1] != '!') return false;
    size_t pos = 2;
    auto skip_blanks = [&] {
        while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
    };
    skip_blanks();
    size_t start = pos;
    while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') ++pos;
    interpreter = line.substr(start, pos - start);
    skip_blanks();
    argument = line.substr(pos);
    while (!argument.empty() && (argument.back() == ' ' || argument.back() == '\t' || argument.back() == '\r')) {
        argument.pop_back();
    }
    return true;
}

std::string basename_of(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

ElfInfo inspect_elf(const std::string& path) {
    ElfInfo info;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        info.error = strerror(errno);
        return info;
    }
    unsigned char ident[EI_NIDENT];
    if (!read_at(in, 0, ident, sizeof ident) || memcmp(ident, ELFMAG, SELFMAG) != 0) {
        info.linkage = Linkage::NotElf;
        return info;
    }
    if (ident[EI_DATA] != ELFDATA2LSB) {
        info.error = "big-endian ELF";
        return info;
    }
    if (ident[EI_CLASS] == ELFCLASS64) {
        info.elf64 = true;
        inspect_program_headers<Elf64_Ehdr, Elf64_Phdr, Elf64_Dyn>(in, info);
    } else if (ident[EI_CLASS] == ELFCLASS32) {
        inspect_program_headers<Elf32_Ehdr, Elf32_Phdr, Elf32_Dyn>(in, info);
    } else {
        info.error = "unknown ELF class";
    }
    return info;
}

LoadedImage resolve_loaded_image(const std::string& path) {
    LoadedImage image;
    image.path = path;
    // Linux follows at most 4 levels of nested interpreters; one more for env.
    for (int depth = 0; depth < 6; ++depth) {
        std::string interpreter;
        std::string argument;
        if (!read_shebang(image.path, interpreter, argument)) return image;
        image.chain.push_back(image.path);
        if (interpreter.empty()) {
            image.error = image.path + " has an empty #! line";
            return image;
        }
        std::string next = interpreter;
        if (basename_of(interpreter) == "env" && !argument.empty()) {
            // "#!/usr/bin/env NAME": env itself is loaded first (and is checked, being in the
            // chain's ELF), but NAME is what runs the script. Take the first word that is not
            // an option of env.
            ElfInfo env_info = inspect_elf(interpreter);
            if (env_info.linkage == Linkage::Static) {
                image.path = interpreter;
                return image;
            }
            size_t pos = 0;
            std::string word;
            while (pos < argument.size()) {
                size_t end = argument.find_first_of(" \t", pos);
                word = argument.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
                if (!word.empty() && word[0] != '-' && word.find('=') == std::string::npos) break;
                word.clear();
                if (end == std::string::npos) break;
                pos = end + 1;
            }
            if (!word.empty()) {
                image.chain.push_back(interpreter);
                auto found = find_in_path(word);
                if (!found) {
                    image.error = "interpreter '" + word + "' of " + path + " not found on PATH";
                    return image;
                }
                next = *found;
            }
        }
        image.path = next;
    }
    image.error = "too many levels of #! interpreters in " + path;
    return image;
}

bool matches_own_architecture(const ElfInfo& info) {
#if defined(__x86_64__)
    return info.elf64 && info.machine == EM_X86_64;
#elif defined(__aarch64__)
    return info.elf64 && info.machine == EM_AARCH64;
#else
    return true;
#endif
}

}  // namespace growtrace::cli
