// The root-cause tree: which findings are evidence of which, on hand-made analysis results
// whose stacks mimic the openai reproduction (a request handler, a cache filled deep inside it,
// classes made on the way) and programs with independent causes.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "analyzer/analysis/analysis.h"
#include "analyzer/report/report_json.h"
#include "analyzer/report/report_text.h"
#include "analyzer/analysis/root_causes.h"

namespace growtrace {
namespace {

Frame py(const std::string& function, const std::string& file, uint32_t line) {
    return Frame{0, function, file, line, "python"};
}

Frame native(const std::string& function, const std::string& module = "/usr/lib/libc.so.6") {
    return Frame{0x1000, function, "", 0, module};
}

// Innermost first, as the analyzer keeps them; `inner` is added on top of the handler's frames.
std::vector<Frame> request_stack(std::vector<Frame> inner, bool with_thread_start = true) {
    inner.push_back(py("handle", "/srv/app.py", 50));
    inner.push_back(py("Thread.run", "/usr/lib/python3.11/threading.py", 982));
    inner.push_back(py("Thread._bootstrap", "/usr/lib/python3.11/threading.py", 1002));
    if (with_thread_start) inner.push_back(native("start_thread"));
    return inner;
}

GroupReport growing_stack(std::vector<Frame> frames, uint64_t bytes, double slope = 1000) {
    GroupReport g;
    g.frames = std::move(frames);
    g.retained_bytes = bytes;
    g.verdict.cls = GrowthClass::Unbounded;
    g.verdict.slope_bytes_per_s = slope;
    return g;
}

TypeReport growing_types(const std::string& name, std::vector<Frame> created_from, uint64_t created = 30) {
    TypeReport t;
    t.type.name = name;
    t.type.created = created;
    t.type.live_at_end = created;
    t.type.unbounded = true;
    t.created_from = std::move(created_from);
    return t;
}

// A cache filled at parse:81 whose keys are classes made at parse:82 (the same call of parse),
// classes made at build:12 (the same call of handle, another line), its entries' memory, one
// stack made in the same call, and a stack from another thread entry that has nothing to do
// with it.
AnalysisResult openai_like_result() {
    AnalysisResult r;
    CacheReport cache;
    cache.cache.name = "app.adapter_for";
    cache.cache.maxsize = -1;
    cache.cache.unbounded = true;
    cache.cache.entries_first = 0;
    cache.cache.entries_last = 60;
    cache.cache.insertions = 60;
    cache.cache.retained_bytes = 10'000'000;
    cache.cache.growth_bytes_per_s = 100'000;
    cache.cache.key_types = {{"app.Message[Fact]", 30, 30}};
    cache.inserted_from = request_stack({native("infinite_lru_cache_wrapper", "/usr/lib/libpython3.11.so"),
                                         py("parse", "/srv/lib.py", 81), py("Client.post", "/srv/lib.py", 20)});
    r.cache_findings.push_back(cache);
    r.type_findings.push_back(growing_types(
        "app.Message[Fact]",
        request_stack({native("type_new", "/usr/lib/libpython3.11.so"), py("parse", "/srv/lib.py", 82),
                       py("Client.post", "/srv/lib.py", 20)})));
    r.type_findings.push_back(growing_types(
        "app.Message[~T]", request_stack({native("type_new", "/usr/lib/libpython3.11.so"), py("build", "/srv/lib.py", 12),
                                          py("Client.post", "/srv/lib.py", 21)})));
    // Holds the entries' memory (the analysis marks it so from the allocation records).
    r.findings.push_back(growing_stack(request_stack({py("make_validator", "/srv/schema.py", 5), py("parse", "/srv/lib.py", 81),
                                                      py("Client.post", "/srv/lib.py", 20)}),
                                       4'000'000));
    r.findings.back().explained_by_cache = "app.adapter_for";
    // Made in the same call of Client.post, without the thread's native start frames.
    r.findings.push_back(growing_stack(
        request_stack({py("copy_fields", "/srv/schema.py", 9), py("build", "/srv/lib.py", 12), py("Client.post", "/srv/lib.py", 21)},
                      /*with_thread_start=*/false),
        300'000, 40'000));
    // Another request type's leak, parting from the cache's stacks inside the thread's run.
    std::vector<Frame> other = {native("malloc"), py("remember", "/srv/audit.py", 3), py("audit_loop", "/srv/audit.py", 30),
                                py("Thread.run", "/usr/lib/python3.11/threading.py", 982),
                                py("Thread._bootstrap", "/usr/lib/python3.11/threading.py", 1002), native("start_thread")};
    r.findings.push_back(growing_stack(other, 200'000, 20'000));
    return r;
}

TEST(RootCauses, StacksPartingInsideOneFunctionAreOneCall) {
    const auto a = request_stack({py("parse", "/srv/lib.py", 81)});
    const auto b = request_stack({py("parse", "/srv/lib.py", 82)});
    EXPECT_TRUE(in_same_call(a, b));
    EXPECT_TRUE(in_same_call(a, a));
    // The native start of a thread is recorded in one stack and not the other: no matter.
    EXPECT_TRUE(in_same_call(a, request_stack({py("parse", "/srv/lib.py", 90)}, false)));
}

TEST(RootCauses, StacksPartingIntoTheNewAndInitOfOneClassAreOneCall) {
    // marshmallow: `type(name, (Schema,), fields)` runs SchemaMeta.__new__ (the interpreter adds
    // the class to its base's subclasses) and then SchemaMeta.__init__ (the library registers it).
    const auto registered = request_stack({py("register", "/lib/class_registry.py", 66), py("SchemaMeta.__init__", "/lib/schema.py", 155),
                                           py("schema_for", "/srv/forms.py", 44)});
    const auto subclassed = request_stack({py("ABCMeta.__new__", "<frozen abc>", 106), py("SchemaMeta.__new__", "/lib/schema.py", 113),
                                           py("schema_for", "/srv/forms.py", 44)});
    EXPECT_TRUE(in_same_call(registered, subclassed));
    EXPECT_TRUE(in_same_call(subclassed, registered));
    // 3.10 names a frame by its function's name only.
    EXPECT_TRUE(in_same_call(request_stack({py("__init__", "/lib/schema.py", 155), py("schema_for", "/srv/forms.py", 44)}),
                             request_stack({py("__new__", "/lib/schema.py", 113), py("schema_for", "/srv/forms.py", 44)})));
    // Two classes' halves, or halves made from a module body, are not.
    EXPECT_FALSE(in_same_call(request_stack({py("A.__init__", "/lib/schema.py", 155), py("schema_for", "/srv/forms.py", 44)}),
                              request_stack({py("B.__new__", "/lib/schema.py", 113), py("schema_for", "/srv/forms.py", 44)})));
    EXPECT_FALSE(in_same_call({py("SchemaMeta.__init__", "/lib/schema.py", 155), py("<module>", "/srv/m.py", 10)},
                              {py("SchemaMeta.__new__", "/lib/schema.py", 113), py("<module>", "/srv/m.py", 10)}));
}

TEST(RootCauses, StacksPartingAtAnEntryPointOrIntoOtherFunctionsAreNot) {
    // Two functions called from the same handler line: two pieces of work.
    EXPECT_FALSE(in_same_call(request_stack({py("parse", "/srv/lib.py", 81)}), request_stack({py("audit", "/srv/a.py", 1)})));
    // Parting inside a module body or a thread's run.
    const std::vector<Frame> module_a = {py("f", "/srv/m.py", 3), py("<module>", "/srv/m.py", 10)};
    const std::vector<Frame> module_b = {py("g", "/srv/m.py", 7), py("<module>", "/srv/m.py", 11)};
    EXPECT_FALSE(in_same_call(module_a, module_b));
    const std::vector<Frame> thread_a = {py("worker_a", "/srv/w.py", 3), py("Thread.run", "/x/threading.py", 982)};
    const std::vector<Frame> thread_b = {py("worker_b", "/srv/w.py", 9), py("Thread.run", "/x/threading.py", 982)};
    EXPECT_FALSE(in_same_call(thread_a, thread_b));
    // Stacks without Python frames are never joined this way.
    EXPECT_FALSE(in_same_call({native("malloc"), native("parse_line", "/bin/app"), native("main", "/bin/app")},
                              {native("malloc"), native("parse_line", "/bin/app"), native("main", "/bin/app")}));
}

TEST(RootCauses, CacheIsTheRootOfItsKeyClassesEntriesAndSameCallWork) {
    const AnalysisResult r = openai_like_result();
    const std::vector<RootCause> roots = find_root_causes(r);
    ASSERT_EQ(roots.size(), 2u);
    const RootCause& cache = roots[0];
    EXPECT_EQ(cache.root, (FindingRef{FindingKind::Cache, 0}));
    ASSERT_EQ(cache.members.size(), 4u);
    EXPECT_EQ(cache.members[0].finding, (FindingRef{FindingKind::Types, 0}));
    EXPECT_EQ(cache.members[0].relation, Relation::KeyClass);
    EXPECT_EQ(cache.members[1].finding, (FindingRef{FindingKind::Types, 1}));
    EXPECT_EQ(cache.members[1].relation, Relation::SameCall);
    EXPECT_EQ(cache.members[2].finding, (FindingRef{FindingKind::Stack, 0}));
    EXPECT_EQ(cache.members[2].relation, Relation::HoldsEntries);
    EXPECT_EQ(cache.members[3].finding, (FindingRef{FindingKind::Stack, 1}));
    EXPECT_EQ(cache.members[3].relation, Relation::SameCall);
    // The cache's figure already counts its entries' memory; the same-call stack adds to it.
    EXPECT_EQ(cache.retained_bytes, 10'300'000u);
    EXPECT_DOUBLE_EQ(cache.growth_bytes_per_s, 140'000);
    EXPECT_EQ(cache.title, "cache app.adapter_for keeps growing");
    EXPECT_NE(cache.remedy.find("re-created with the same name (app.Message[Fact]: 30 distinct, all alive)"),
              std::string::npos)
        << cache.remedy;

    const RootCause& other = roots[1];
    EXPECT_EQ(other.root, (FindingRef{FindingKind::Stack, 2}));
    EXPECT_TRUE(other.members.empty());
    EXPECT_EQ(other.title, "memory allocated in remember (audit.py:3) keeps growing");
}

TEST(RootCauses, ACacheWithoutRepeatedKeyClassesIsToldToBound) {
    AnalysisResult r = openai_like_result();
    r.cache_findings[0].cache.key_types.clear();
    const std::vector<RootCause> roots = find_root_causes(r);
    EXPECT_NE(roots[0].remedy.find("never evicted (maxsize=None)"), std::string::npos) << roots[0].remedy;
    // Without key classes, the class made at parse:82 is still made in the cache's call.
    EXPECT_EQ(roots[0].members[0].relation, Relation::SameCall);
}

TEST(RootCauses, ClassesNoCacheExplainsAreARootWithTheirSameCallStacks) {
    AnalysisResult r = openai_like_result();
    r.cache_findings.clear();
    r.findings[0].explained_by_cache.clear();
    const std::vector<RootCause> roots = find_root_causes(r);
    // Message[Fact] (root) takes Message[~T] (same call of Client.post) and both stacks made in
    // that call; the audit stack stays its own root.
    ASSERT_EQ(roots.size(), 2u);
    EXPECT_EQ(roots[0].root, (FindingRef{FindingKind::Types, 0}));
    EXPECT_EQ(roots[0].members.size(), 3u);
    EXPECT_EQ(roots[0].retained_bytes, 4'300'000u);
    EXPECT_NE(roots[0].title.find("classes named app.Message[Fact]"), std::string::npos);
    EXPECT_EQ(roots[1].root, (FindingRef{FindingKind::Stack, 2}));
}

TEST(RootCauses, JsonGivesEveryFindingOneRootCauseAndKeepsTheFlatList) {
    const AnalysisResult r = [] {
        AnalysisResult out = openai_like_result();
        out.root_causes = find_root_causes(out);
        return out;
    }();
    const nlohmann::json j = report_json(r);
    ASSERT_EQ(j["findings"].size(), 6u);
    ASSERT_EQ(j["root_causes"].size(), 2u);
    std::set<size_t> seen;
    for (const nlohmann::json& rc : j["root_causes"]) {
        seen.insert(rc["finding"].get<size_t>());
        EXPECT_EQ(j["findings"][rc["finding"].get<size_t>() - 1]["role"], "root");
        for (const nlohmann::json& m : rc["members"]) {
            EXPECT_TRUE(seen.insert(m["finding"].get<size_t>()).second) << "a finding in two root causes";
            const nlohmann::json& f = j["findings"][m["finding"].get<size_t>() - 1];
            EXPECT_EQ(f["role"], "evidence");
            EXPECT_EQ(f["root_cause"], rc["id"]);
        }
    }
    EXPECT_EQ(seen.size(), 6u) << "every finding is in a root cause";
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(j["findings"][i]["id"], i + 1);
    EXPECT_EQ(j["root_causes"][0]["kind"], "cache_growth");
    EXPECT_EQ(j["root_causes"][0]["members"][0]["relation"], "key_class");
    EXPECT_EQ(j["root_causes"][1]["kind"], "unbounded_growth");
    EXPECT_EQ(j["findings"][0]["kind"], "cache_growth") << "the flat list keeps its order";
}

TEST(RootCauses, TextLeadsWithTheRootCauseCountAndFoldsTheEvidence) {
    AnalysisResult r = openai_like_result();
    r.command = "python app.py";
    r.root_causes = find_root_causes(r);
    std::ostringstream out;
    write_text_report(r, out);
    const std::string text = out.str();
    EXPECT_EQ(text.rfind("2 root causes of unbounded growth in python app.py", 0), 0u) << text;
    EXPECT_NE(text.find("from 6 unbounded growth findings"), std::string::npos) << text;
    EXPECT_NE(text.find("remedy: the keys are classes re-created"), std::string::npos) << text;
    EXPECT_NE(text.find("evidence (the keys' classes): classes named app.Message[Fact]"), std::string::npos) << text;
    EXPECT_NE(text.find("evidence (its entries' memory): 1 growing stack holds 4.0 MB, allocated in make_validator (schema.py:5)"), std::string::npos) << text;
    // The two roots are numbered; the evidence is not printed as findings of its own.
    EXPECT_NE(text.find("\n#2 "), std::string::npos) << text;
    EXPECT_EQ(text.find("\n#3 "), std::string::npos) << text;
}

// A native program growing inside a stripped library through two internal paths, under one
// call of the program, and through the same library under another call; an allocation the
// program makes itself stays its own.
AnalysisResult library_growth_result() {
    AnalysisResult r;
    r.exe = "/srv/bin/server";
    auto in_library = [](std::vector<Frame> inner, const Frame& caller) {
        inner.push_back(native("registry_remember", "/usr/lib/libregistry.so.2"));
        inner.push_back(caller);
        inner.push_back(native("main", "/srv/bin/server"));
        inner.push_back(native("__libc_start_main"));
        return inner;
    };
    const Frame handle{0x2000, "handle_request", "/srv/server.cpp", 21, "/srv/bin/server"};
    const Frame reload{0x3000, "reload_config", "/srv/server.cpp", 90, "/srv/bin/server"};
    r.findings.push_back(growing_stack(in_library({native("malloc"), native("libregistry.so.2+0x11a3", "/usr/lib/libregistry.so.2")}, handle), 70'000'000));
    r.findings.push_back(growing_stack(in_library({native("calloc"), native("libregistry.so.2+0x1145", "/usr/lib/libregistry.so.2")}, handle), 40'000'000));
    r.findings.push_back(growing_stack(in_library({native("malloc"), native("libregistry.so.2+0x1145", "/usr/lib/libregistry.so.2")}, reload), 3'000'000));
    r.findings.push_back(growing_stack({native("malloc"), handle, native("main", "/srv/bin/server")}, 2'000'000));
    return r;
}

TEST(RootCauses, GrowthInsideOneLibraryUnderOneCallIsOneCauseNamedByTheCallAndTheLibrary) {
    const AnalysisResult r = library_growth_result();
    const std::vector<RootCause> roots = find_root_causes(r);
    ASSERT_EQ(roots.size(), 3u);
    EXPECT_EQ(roots[0].root, (FindingRef{FindingKind::Stack, 0}));
    ASSERT_EQ(roots[0].members.size(), 1u);
    EXPECT_EQ(roots[0].members[0].finding, (FindingRef{FindingKind::Stack, 1}));
    EXPECT_EQ(roots[0].members[0].relation, Relation::SameLibraryCall);
    EXPECT_EQ(roots[0].retained_bytes, 110'000'000u);
    EXPECT_EQ(roots[0].title,
              "memory allocated inside libregistry.so.2 (registry_remember), called from handle_request (server.cpp:21), keeps growing");
    EXPECT_NE(roots[0].summary.find("through 2 paths inside libregistry.so.2"), std::string::npos) << roots[0].summary;
    // The same library under another call of the program, and the program's own allocation.
    EXPECT_EQ(roots[1].root, (FindingRef{FindingKind::Stack, 2}));
    EXPECT_NE(roots[1].title.find("called from reload_config"), std::string::npos) << roots[1].title;
    EXPECT_EQ(roots[2].root, (FindingRef{FindingKind::Stack, 3}));
    EXPECT_EQ(roots[2].title, "memory allocated in handle_request (server.cpp:21) keeps growing");
}

TEST(RootCauses, InterpreterFramesAreNoLibraryCall) {
    // A Python program's growth in its own code runs through libpython and libc only: nothing
    // folds, whatever the lines.
    AnalysisResult r;
    r.exe = "/usr/bin/python3.11";
    const Frame eval = native("_PyEval_EvalFrameDefault", "/usr/lib/libpython3.11.so.1.0");
    r.findings.push_back(growing_stack({native("malloc"), eval, py("remember", "/srv/a.py", 3), py("main", "/srv/a.py", 9)}, 5'000'000));
    r.findings.push_back(growing_stack({native("malloc"), eval, py("remember", "/srv/a.py", 4), py("main", "/srv/a.py", 9)}, 4'000'000));
    EXPECT_EQ(find_root_causes(r).size(), 2u);
}

TEST(RootCauses, TextNamesTheLibrarysOtherPathsAsEvidence) {
    AnalysisResult r = library_growth_result();
    r.command = "server";
    r.root_causes = find_root_causes(r);
    std::ostringstream out;
    write_text_report(r, out);
    EXPECT_NE(out.str().find("evidence (other paths inside the library): 1 growing stack holds 40.0 MB"), std::string::npos) << out.str();
    const nlohmann::json j = report_json(r);
    EXPECT_EQ(j["root_causes"][0]["members"][0]["relation"], "same_library_call");
}


// A registry filled per form (marshmallow's class registry in a service that builds a Schema
// class per form): `handle` fills it through `schema_for` and, on the same line, loads through
// the new class, whose copies of the fields stay alive with it. Measured by five walks.
struct RegistryCase {
    AnalysisResult result;
    std::vector<Frame> from_handle(std::vector<Frame> inner, const std::string& file = "/srv/forms.py",
                                   uint32_t line = 56) {
        inner.push_back(py("handle", file, line));
        inner.push_back(py("main", "/srv/forms.py", 79));
        inner.push_back(py("<module>", "/srv/forms.py", 90));
        return inner;
    }
    RegistryCase() {
        ContainerReport c;
        c.container.kind = "dict";
        c.container.name = "marshmallow.class_registry._registry";
        c.container.unbounded = true;
        c.container.entries_first = 800;
        c.container.entries_last = 6000;
        c.container.entries_over_time = {{2.0, 800}, {3.6, 2300}, {5.1, 3800}, {6.6, 5350}, {7.2, 6000}};
        c.inserted_from = from_handle({py("register", "/venv/lib/python3.11/site-packages/marshmallow/class_registry.py", 62),
                                       py("schema_for", "/srv/forms.py", 46)});
        result.container_findings.push_back(c);
        for (int w = 0; w < 80; ++w) result.timeline.push_back({0.1 * (w + 1), 0, 0});
    }
    // A growing stack under `load`, whose level at each of the walks is `bytes_at_walks` (and in
    // between, the level of the walk before).
    GroupReport under_load(const std::vector<double>& bytes_at_walks, uint32_t line = 56,
                           const std::string& file = "/srv/forms.py") {
        GroupReport g = growing_stack(
            from_handle({py("Field.deserialize", "/venv/lib/python3.11/site-packages/marshmallow/fields.py", 380),
                         py("Schema.load", "/venv/lib/python3.11/site-packages/marshmallow/schema.py", 734)},
                        file, line),
            static_cast<uint64_t>(bytes_at_walks.back()));
        const auto& walks = result.container_findings[0].container.entries_over_time;
        for (const TimelinePoint& p : result.timeline) {
            double level = 0;
            for (size_t i = 0; i < walks.size(); ++i)
                if (walks[i].t_s <= p.t_s + 1e-9) level = bytes_at_walks[i];
            g.retained_series.push_back(static_cast<uint64_t>(level));
        }
        return g;
    }
    // The bytes of a stack that keeps `per_entry` bytes per entry of the registry.
    std::vector<double> in_step(double per_entry) const {
        std::vector<double> bytes;
        for (const SeriesPoint& p : result.container_findings[0].container.entries_over_time)
            bytes.push_back(per_entry * p.value);
        return bytes;
    }
};

TEST(RootCauses, StacksGrowingInStepWithARegistryUnderTheLineThatFillsItAreItsEvidence) {
    RegistryCase k;
    k.result.findings.push_back(k.under_load(k.in_step(72)));
    k.result.findings.push_back(k.under_load(k.in_step(40)));
    const std::vector<RootCause> roots = find_root_causes(k.result);
    ASSERT_EQ(roots.size(), 1u);
    EXPECT_EQ(roots[0].root.kind, FindingKind::Container);
    ASSERT_EQ(roots[0].members.size(), 2u);
    EXPECT_EQ(roots[0].members[0].relation, Relation::GrowsWithEntries);
    EXPECT_STREQ(relation_name(Relation::GrowsWithEntries), "grows_with_entries");
    // Its memory is the root's: the container's own figure (its entries' stacks) does not count it.
    EXPECT_EQ(roots[0].retained_bytes, 112u * 6000u);
}

TEST(RootCauses, AStackOutOfStepWithTheEntriesIsACauseOfItsOwn) {
    RegistryCase k;
    // Grows, but nearly all of it while the registry filled its last few entries.
    k.result.findings.push_back(k.under_load({57'600, 64'800, 72'000, 79'200, 432'000}));
    EXPECT_EQ(find_root_causes(k.result).size(), 2u);
}

TEST(RootCauses, StacksPartingBelowALibraryOrAnEntryLineAreNotFoldedByPace) {
    // In step, but parting inside a library's frame (a framework's dispatch line), or inside a
    // module body: two pieces of work, whatever their pace.
    RegistryCase library;
    library.result.container_findings[0].inserted_from =
        library.from_handle({py("schema_for", "/srv/forms.py", 46)}, "/venv/lib/python3.11/site-packages/flask/app.py", 880);
    library.result.findings.push_back(library.under_load(library.in_step(72), 880,
                                                         "/venv/lib/python3.11/site-packages/flask/app.py"));
    EXPECT_EQ(find_root_causes(library.result).size(), 2u);

    RegistryCase module_body;
    std::vector<Frame>& filled = module_body.result.container_findings[0].inserted_from;
    filled.erase(filled.end() - 3, filled.end());
    filled.push_back(py("<module>", "/srv/forms.py", 90));
    GroupReport g = module_body.under_load(module_body.in_step(72));
    g.frames.erase(g.frames.end() - 3, g.frames.end());
    g.frames.push_back(py("<module>", "/srv/forms.py", 90));
    module_body.result.findings.push_back(g);
    EXPECT_EQ(find_root_causes(module_body.result).size(), 2u);
}


TEST(RootCauses, PaceIsJudgedOverIntervalsThatAddEntriesNotOverWalksAMomentApart) {
    // The exit's walk a moment after the last one: two entries more, no memory yet. Still in step.
    RegistryCase k;
    auto& walks = k.result.container_findings[0].container.entries_over_time;
    walks = {{2.0, 800}, {4.0, 3400}, {6.0, 5998}, {6.01, 6000}};
    k.result.findings.push_back(k.under_load({57'600, 244'800, 431'856, 431'856}));
    EXPECT_EQ(find_root_causes(k.result).size(), 1u);
    // Two measurements are one interval: no pace to compare.
    RegistryCase few;
    few.result.container_findings[0].container.entries_over_time = {{2.0, 800}, {6.0, 6000}};
    few.result.findings.push_back(few.under_load({57'600, 432'000}));
    EXPECT_EQ(find_root_causes(few.result).size(), 2u);
}

}  // namespace
}  // namespace growtrace
