// growtrace: verb dispatch. Each verb lives in its own cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common.h"
#include "crash_report.h"
#include "version.h"

namespace growtrace::cli {

int error(std::string_view message) {
    fmt::print(stderr, "growtrace: error: {}\n", message);
    return kExitError;
}

void warning(std::string_view message) { fmt::print(stderr, "growtrace: warning: {}\n", message); }

void note(std::string_view message) { fmt::print(stderr, "growtrace: {}\n", message); }

}  // namespace growtrace::cli

int main(int argc, char** argv) {
    using namespace growtrace::cli;
    using growtrace::kExitError;
    install_crash_report(argc, argv);
    crash_here_for_tests("start");
    crash_here_for_tests("exception");

    // Everything after the first "--" belongs to the traced command, never to CLI11.
    std::vector<std::string> args(argv + 1, argv + argc);
    Trailing trailing;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--") {
            trailing.words.assign(args.begin() + static_cast<ptrdiff_t>(i) + 1, args.end());
            trailing.present = true;
            args.resize(i);
            break;
        }
    }

    CLI::App app{"growtrace finds memory held in caches that never stop growing.", "growtrace"};
    app.set_version_flag("--version", version_text,
                         "Say the version, the trace formats it writes and reads, and the CPython versions "
                         "it has agents for, and exit");
    app.require_subcommand(1);

    std::vector<Verb> verbs;
    verbs.push_back(add_run_verb(app, trailing));
    verbs.push_back(add_analyze_verb(app));
    verbs.push_back(add_dump_verb(app));
    verbs.push_back(add_attach_verb(app));
    verbs.push_back(add_detach_verb(app));
    verbs.push_back(add_report_verb(app));
    verbs.push_back(add_check_verb(app, trailing));
    verbs.push_back(add_diff_verb(app));
    verbs.push_back(add_export_verb(app));

    if (args.empty() && !trailing.present) {
        fmt::print(stderr, "{}", app.help());
        return kExitError;
    }
    auto is_verb = [&](const std::string& word) {
        for (const Verb& verb : verbs) {
            if (verb.app->get_name() == word) return true;
        }
        return false;
    };
    if (!args.empty() && !args[0].empty() && args[0][0] != '-' && !is_verb(args[0])) {
        std::string names;
        for (size_t i = 0; i < verbs.size(); ++i)
            names += (i == 0 ? "" : i + 1 == verbs.size() ? " or " : ", ") + verbs[i].app->get_name();
        return error(fmt::format("unknown verb '{}' (expected {}; see growtrace --help)", args[0], names));
    }
    if (trailing.present && (args.empty() || (args[0] != "run" && args[0] != "check"))) {
        return error("'--' is only accepted by 'growtrace run -- COMMAND [ARGS...]'");
    }

    // CLI11 parses a vector given in reverse order.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
        app.parse(reversed);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        error(e.what());
        fmt::print(stderr, "Run with --help for more information.\n");
        return kExitError;
    }

    for (const Verb& verb : verbs) {
        if (verb.app->parsed()) return verb.run();
    }
    return error("no verb given");
}
