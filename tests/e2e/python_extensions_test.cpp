// The tracer never crashes the program: classes made the ways C extensions and
// Cython make them, and the compiled extension packages users load most, run under `growtrace
// run`, in full and sampled (--sample 512K), with the exit status and standard output they have
// untraced, on every CPython version growtrace reads. The library's PyType_Ready hook reads
// every class made ready; `import grpc` (Cython: static types flagged as heap types while they
// are made ready) used to kill the program with SIGSEGV there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <tuple>
#include <vector>

#include "e2e_support.h"

namespace growtrace::e2e {
namespace {

const std::string kOddTypesDir = GT_PYTHON_EXT_DIR;

// Runs `program` untraced, then traced in full and sampled (and with each of `more_runs`'
// options): same exit status, same stdout.
void expect_traced_like_untraced(const ScratchDir& dir, const std::vector<std::string>& program,
                                 const std::string& expected_in_output,
                                 const std::vector<std::vector<std::string>>& more_runs = {}) {
    ProcessResult untraced = run_process(program, {.cwd = dir.path().string()});
    ASSERT_EQ(untraced.signal, 0) << untraced.err;
    ASSERT_EQ(untraced.exit_code, 0) << untraced.err;
    ASSERT_NE(untraced.out.find(expected_in_output), std::string::npos) << untraced.out;
    std::vector<std::vector<std::string>> runs{mode_options(TraceMode::Full), mode_options(TraceMode::Sampled)};
    runs.insert(runs.end(), more_runs.begin(), more_runs.end());
    for (size_t r = 0; r < runs.size(); ++r) {
        std::string options;
        for (const std::string& o : runs[r]) options += " " + o;
        SCOPED_TRACE("growtrace run" + options);
        std::vector<std::string> args{"run"};
        args.insert(args.end(), runs[r].begin(), runs[r].end());
        const std::string trace = dir / ("ext_" + std::to_string(r) + ".gtrace");
        args.insert(args.end(), {"-o", trace, "--"});
        args.insert(args.end(), program.begin(), program.end());
        ProcessResult traced = growtrace(args, {.cwd = dir.path().string()});
        EXPECT_EQ(traced.signal, 0) << traced.err;
        EXPECT_EQ(traced.exit_code, untraced.exit_code) << traced.describe() << "\n" << traced.err;
        EXPECT_EQ(traced.out, untraced.out);
        EXPECT_NE(traced.err.find("growtrace: trace written to " + trace), std::string::npos) << traced.err;
    }
}

class OddTypes : public ::testing::TestWithParam<PythonUnderTest> {};

// test_programs/python/ext/_gt_odd_types.c: a Cython-style static type flagged as a heap type
// while it is made ready (followed in memory by a pointer to nothing, and at the very end of a
// readable page), a plain static type, one without tp_name, PyType_FromSpec types with and
// without a module, and heap types built by hand without names or with a qualname that is not
// a str. Each is made ready, used, subclassed by Python and used as a cache key. Also run with
// --no-python-objects, where the crash was first seen.
TEST_P(OddTypes, ClassesMadeLikeCExtensionsAndCythonRunAsUntraced) {
    const PythonUnderTest& py = GetParam();
    GT_SKIP_UNLESS_INSTALLED(py, false);
    const std::string minor = py.name.substr(2, py.name.find('-') == std::string::npos ? std::string::npos
                                                                                        : py.name.find('-') - 2);
    const std::string module = kOddTypesDir + "/_gt_odd_types.cpython-3" + minor + "-x86_64-linux-gnu.so";
    if (access(module.c_str(), R_OK) != 0)
        GTEST_SKIP() << module << " was not built (no CPython 3." << minor << " headers at build time)";
    ScratchDir dir;
    expect_traced_like_untraced(dir, {py.python, kPythonPrograms + "odd_types.py", kOddTypesDir},
                                "odd_types classes=9", {{"--no-python-objects"}});
}

INSTANTIATE_TEST_SUITE_P(Interpreters, OddTypes, ::testing::ValuesIn(pythons_under_test()), python_test_name);

// The compiled extension packages of tools/python_extensions_requirements.txt, each imported
// and used a little (test_programs/python/compiled_extensions.py).
struct Package {
    std::string name;          // the argument of compiled_extensions.py
    std::string distribution;  // what to install
    std::string import;        // the statement that fails where it is not installed
};
const std::vector<Package> kPackages = {
    {"grpc", "grpcio", "import grpc"},
    {"protobuf", "protobuf", "import google.protobuf"},
    {"numpy", "numpy", "import numpy"},
    {"orjson", "orjson", "import orjson"},
    {"ujson", "ujson", "import ujson"},
    {"yaml", "PyYAML with its C loader", "import yaml; assert yaml.__with_libyaml__"},
    {"pydantic_core", "pydantic-core", "import pydantic_core"},
    {"lxml", "lxml", "import lxml.etree"},
    {"cryptography", "cryptography", "import cryptography.hazmat.primitives.ciphers.aead"},
    {"pandas", "pandas", "import pandas"},
    {"psycopg2", "psycopg2-binary", "import psycopg2"},
};

inline void PrintTo(const Package& p, std::ostream* os) { *os << p.name; }

class RealExtensions : public ::testing::TestWithParam<std::tuple<PythonUnderTest, Package>> {};

std::string extension_test_name(const ::testing::TestParamInfo<std::tuple<PythonUnderTest, Package>>& info) {
    ::testing::TestParamInfo<PythonUnderTest> py(std::get<0>(info.param), info.index);
    return python_test_name(py) + "_" + std::get<1>(info.param).name;
}

TEST_P(RealExtensions, ImportedAndUsedAsUntraced) {
    const auto& [py, package] = GetParam();
    if (access(py.python.c_str(), X_OK) != 0)
        GTEST_SKIP() << "CPython " << py.name << ": " << py.python
                     << " is not installed (tools/setup_python.sh makes the venvs)";
    if (!py.packages)
        GTEST_SKIP() << "CPython " << py.name << " has no venv to install " << package.distribution << " into";
    // The import alone, untraced: where it fails the package is missing here.
    ProcessResult probe = run_process({py.python, "-c", package.import});
    if (probe.exit_code != 0)
        GTEST_SKIP() << package.distribution << " is not installed for CPython " << py.name
                     << " (tools/setup_python.sh installs tools/python_extensions_requirements.txt): "
                     << probe.err.substr(0, 300);
    ScratchDir dir;
    expect_traced_like_untraced(dir, {py.python, kPythonPrograms + "compiled_extensions.py", package.name},
                                package.name + " ");
}

std::vector<PythonUnderTest> venv_pythons() {
    std::vector<PythonUnderTest> out;
    for (const PythonUnderTest& p : pythons_under_test())
        if (p.packages) out.push_back(p);
    return out;
}

INSTANTIATE_TEST_SUITE_P(Interpreters, RealExtensions,
                         ::testing::Combine(::testing::ValuesIn(venv_pythons()), ::testing::ValuesIn(kPackages)),
                         extension_test_name);

}  // namespace
}  // namespace growtrace::e2e
