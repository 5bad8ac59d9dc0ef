/* A program for `growtrace attach` that keeps known values in its registers: the vector
 * registers (ymm0-15, and zmm0-31 with k0-7 where the CPU has AVX-512) hold a pattern through
 * loops of about 100 ms that touch nothing but a counter, and, where the CPU has AMX, the eight
 * tiles hold a pattern for the whole run. gdb interrupts it nearly always inside such a loop,
 * makes its calls there and must put every register back, through the XSAVE state (the tiles
 * lie past what gdb before 14 knows of it: tools/attach/gdb_xstate_shim.c keeps them).
 *
 * Prints "registers ..." (what it holds), then "tick N ok" after each loop; a register found
 * changed prints "tick N changed REGISTER" and exits 3.
 *
 * usage: xstate_keeper [SECONDS=60]   (exits 0 after that long) */
#define _GNU_SOURCE
#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { kLoopMilliseconds = 100 };

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill_pattern(uint8_t* bytes, size_t size, unsigned seed) {
    for (size_t i = 0; i < size; ++i) bytes[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8) * 13 + 1);
}

/* ---- ymm0-15 (AVX) ---- */

static uint8_t g_ymm_in[16][32] __attribute__((aligned(64)));
static uint8_t g_ymm_out[16][32] __attribute__((aligned(64)));

__attribute__((target("avx"), noinline)) static void hold_ymm(uint64_t spins) {
    __asm__ volatile(
        "vmovdqu 0*32(%[in]), %%ymm0\n\t"
        "vmovdqu 1*32(%[in]), %%ymm1\n\t"
        "vmovdqu 2*32(%[in]), %%ymm2\n\t"
        "vmovdqu 3*32(%[in]), %%ymm3\n\t"
        "vmovdqu 4*32(%[in]), %%ymm4\n\t"
        "vmovdqu 5*32(%[in]), %%ymm5\n\t"
        "vmovdqu 6*32(%[in]), %%ymm6\n\t"
        "vmovdqu 7*32(%[in]), %%ymm7\n\t"
        "vmovdqu 8*32(%[in]), %%ymm8\n\t"
        "vmovdqu 9*32(%[in]), %%ymm9\n\t"
        "vmovdqu 10*32(%[in]), %%ymm10\n\t"
        "vmovdqu 11*32(%[in]), %%ymm11\n\t"
        "vmovdqu 12*32(%[in]), %%ymm12\n\t"
        "vmovdqu 13*32(%[in]), %%ymm13\n\t"
        "vmovdqu 14*32(%[in]), %%ymm14\n\t"
        "vmovdqu 15*32(%[in]), %%ymm15\n\t"
        "1: pause\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        "vmovdqu %%ymm0, 0*32(%[out])\n\t"
        "vmovdqu %%ymm1, 1*32(%[out])\n\t"
        "vmovdqu %%ymm2, 2*32(%[out])\n\t"
        "vmovdqu %%ymm3, 3*32(%[out])\n\t"
        "vmovdqu %%ymm4, 4*32(%[out])\n\t"
        "vmovdqu %%ymm5, 5*32(%[out])\n\t"
        "vmovdqu %%ymm6, 6*32(%[out])\n\t"
        "vmovdqu %%ymm7, 7*32(%[out])\n\t"
        "vmovdqu %%ymm8, 8*32(%[out])\n\t"
        "vmovdqu %%ymm9, 9*32(%[out])\n\t"
        "vmovdqu %%ymm10, 10*32(%[out])\n\t"
        "vmovdqu %%ymm11, 11*32(%[out])\n\t"
        "vmovdqu %%ymm12, 12*32(%[out])\n\t"
        "vmovdqu %%ymm13, 13*32(%[out])\n\t"
        "vmovdqu %%ymm14, 14*32(%[out])\n\t"
        "vmovdqu %%ymm15, 15*32(%[out])\n\t"
        "vzeroupper\n\t"
        : [n] "+r"(spins)
        : [in] "r"(g_ymm_in), [out] "r"(g_ymm_out)
        : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

/* ---- zmm0-31 and k0-7 (AVX-512) ---- */

static uint8_t g_zmm_in[32][64] __attribute__((aligned(64)));
static uint8_t g_zmm_out[32][64] __attribute__((aligned(64)));
static uint16_t g_k_in[8], g_k_out[8];

#define GT_ZMM_LOAD(i) "vmovdqu64 " #i "*64(%[in]), %%zmm" #i "\n\t"
#define GT_ZMM_STORE(i) "vmovdqu64 %%zmm" #i ", " #i "*64(%[out])\n\t"
#define GT_K_LOAD(i) "kmovw " #i "*2(%[kin]), %%k" #i "\n\t"
#define GT_K_STORE(i) "kmovw %%k" #i ", " #i "*2(%[kout])\n\t"
#define GT_EIGHT(m, a, b, c, d, e, f, g, h) m(a) m(b) m(c) m(d) m(e) m(f) m(g) m(h)

__attribute__((target("avx512f"), noinline)) static void hold_zmm(uint64_t spins) {
    __asm__ volatile(
        GT_EIGHT(GT_ZMM_LOAD, 0, 1, 2, 3, 4, 5, 6, 7) GT_EIGHT(GT_ZMM_LOAD, 8, 9, 10, 11, 12, 13, 14, 15)
        GT_EIGHT(GT_ZMM_LOAD, 16, 17, 18, 19, 20, 21, 22, 23) GT_EIGHT(GT_ZMM_LOAD, 24, 25, 26, 27, 28, 29, 30, 31)
        GT_EIGHT(GT_K_LOAD, 0, 1, 2, 3, 4, 5, 6, 7)
        "1: pause\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n\t"
        GT_EIGHT(GT_ZMM_STORE, 0, 1, 2, 3, 4, 5, 6, 7) GT_EIGHT(GT_ZMM_STORE, 8, 9, 10, 11, 12, 13, 14, 15)
        GT_EIGHT(GT_ZMM_STORE, 16, 17, 18, 19, 20, 21, 22, 23) GT_EIGHT(GT_ZMM_STORE, 24, 25, 26, 27, 28, 29, 30, 31)
        GT_EIGHT(GT_K_STORE, 0, 1, 2, 3, 4, 5, 6, 7)
        "vzeroupper\n\t"
        : [n] "+r"(spins)
        : [in] "r"(g_zmm_in), [out] "r"(g_zmm_out), [kin] "r"(g_k_in), [kout] "r"(g_k_out)
        : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
          "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k0", "k1", "k2", "k3",
          "k4", "k5", "k6", "k7");
}

/* ---- AMX tiles 0-7: loaded once, read back after each loop ---- */

enum { kTiles = 8, kTileRows = 16, kTileBytesPerRow = 64 };
static uint8_t g_tiles_in[kTiles][kTileRows * kTileBytesPerRow] __attribute__((aligned(64)));
static uint8_t g_tiles_out[kTiles][kTileRows * kTileBytesPerRow] __attribute__((aligned(64)));

static int amx_usable(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24))) return 0;  // AMX-TILE
    /* Linux lets a process use the tile data only once it asked (ARCH_REQ_XCOMP_PERM for
     * XFEATURE_XTILEDATA), and not at all where it does not support them for user space (some
     * virtual machines): ARCH_GET_XCOMP_PERM then lacks the feature. */
    uint64_t permitted = 0;
    syscall(SYS_arch_prctl, 0x1023, 18);
    return syscall(SYS_arch_prctl, 0x1024, &permitted) == 0 && (permitted & (1ull << 18));
}

__attribute__((target("amx-tile"), noinline)) static void load_tiles(void) {
    uint8_t config[64] __attribute__((aligned(64)));
    memset(config, 0, sizeof config);
    config[0] = 1;  // palette 1
    for (int t = 0; t < kTiles; ++t) {
        config[16 + 2 * t] = kTileBytesPerRow;  // colsb, little-endian u16
        config[48 + t] = kTileRows;             // rows
    }
    _tile_loadconfig(config);
    _tile_loadd(0, g_tiles_in[0], kTileBytesPerRow);
    _tile_loadd(1, g_tiles_in[1], kTileBytesPerRow);
    _tile_loadd(2, g_tiles_in[2], kTileBytesPerRow);
    _tile_loadd(3, g_tiles_in[3], kTileBytesPerRow);
    _tile_loadd(4, g_tiles_in[4], kTileBytesPerRow);
    _tile_loadd(5, g_tiles_in[5], kTileBytesPerRow);
    _tile_loadd(6, g_tiles_in[6], kTileBytesPerRow);
    _tile_loadd(7, g_tiles_in[7], kTileBytesPerRow);
}

__attribute__((target("amx-tile"), noinline)) static void store_tiles(void) {
    _tile_stored(0, g_tiles_out[0], kTileBytesPerRow);
    _tile_stored(1, g_tiles_out[1], kTileBytesPerRow);
    _tile_stored(2, g_tiles_out[2], kTileBytesPerRow);
    _tile_stored(3, g_tiles_out[3], kTileBytesPerRow);
    _tile_stored(4, g_tiles_out[4], kTileBytesPerRow);
    _tile_stored(5, g_tiles_out[5], kTileBytesPerRow);
    _tile_stored(6, g_tiles_out[6], kTileBytesPerRow);
    _tile_stored(7, g_tiles_out[7], kTileBytesPerRow);
}

/* ---- the run ---- */

static int g_avx512, g_amx;

static void hold(uint64_t spins) {
    if (g_avx512) hold_zmm(spins);
    else hold_ymm(spins);
}

/* The first register whose value is not the pattern's, or NULL. */
static const char* changed_register(void) {
    static char name[16];
    if (g_avx512) {
        for (int i = 0; i < 32; ++i)
            if (memcmp(g_zmm_in[i], g_zmm_out[i], 64) != 0) return snprintf(name, sizeof name, "zmm%d", i), name;
        for (int i = 0; i < 8; ++i)
            if (g_k_in[i] != g_k_out[i]) return snprintf(name, sizeof name, "k%d", i), name;
    } else {
        for (int i = 0; i < 16; ++i)
            if (memcmp(g_ymm_in[i], g_ymm_out[i], 32) != 0) return snprintf(name, sizeof name, "ymm%d", i), name;
    }
    if (g_amx) {
        store_tiles();
        for (int t = 0; t < kTiles; ++t)
            if (memcmp(g_tiles_in[t], g_tiles_out[t], sizeof g_tiles_in[t]) != 0)
                return snprintf(name, sizeof name, "tile%d", t), name;
    }
    return NULL;
}

int main(int argc, char** argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 60;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx")) {
        printf("registers none (no AVX)\n");
        fflush(stdout);
        sleep((unsigned)seconds);
        return 0;
    }
    g_avx512 = __builtin_cpu_supports("avx512f");
    g_amx = amx_usable();
    fill_pattern(&g_ymm_in[0][0], sizeof g_ymm_in, 1);
    fill_pattern(&g_zmm_in[0][0], sizeof g_zmm_in, 2);
    for (int i = 0; i < 8; ++i) g_k_in[i] = (uint16_t)(0x1234 + 0x1111 * i);
    fill_pattern(&g_tiles_in[0][0], sizeof g_tiles_in, 3);
    if (g_amx) load_tiles();

    /* Spins for about kLoopMilliseconds, measured on a first short loop. */
    uint64_t spins = 100000;
    double t0 = now_seconds();
    hold(spins);
    double took = now_seconds() - t0;
    if (took > 0) spins = (uint64_t)((double)spins * (kLoopMilliseconds / 1000.0) / took) + 1;

    printf("registers %s%s\n", g_avx512 ? "zmm0-31 k0-7" : "ymm0-15", g_amx ? " tiles0-7" : "");
    fflush(stdout);
    double end = now_seconds() + seconds;
    for (unsigned long tick = 0; now_seconds() < end; ++tick) {
        hold(spins);
        const char* changed = changed_register();
        printf("tick %lu %s%s\n", tick, changed ? "changed " : "ok", changed ? changed : "");
        fflush(stdout);
        if (changed) return 3;
    }
    return 0;
}
