// doctest's main, with one check of our own: a run asked for test cases by name
// (--test-case=, -tc=) that matches none fails. CTest runs each case by its name, and a name
// CTest cannot carry whole (one with a ';', which CMake splits into two) matched nothing and
// passed, so a case could fail for ever unseen.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string_view>

namespace {

unsigned cases_matched = 0;  // set once the run ends

// Hears how many test cases passed the filters; reports nothing itself.
struct match_counter : doctest::IReporter {
  explicit match_counter(const doctest::ContextOptions& /*options*/) {}

  void test_run_end(const doctest::TestRunStats& stats) override {
    cases_matched = stats.numTestCasesPassingFilters;
  }
  void report_query(const doctest::QueryData& /*data*/) override {}
  void test_run_start() override {}
  void test_case_start(const doctest::TestCaseData& /*data*/) override {}
  void test_case_reenter(const doctest::TestCaseData& /*data*/) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& /*stats*/) override {}
  void test_case_exception(const doctest::TestCaseException& /*exception*/) override {}
  void subcase_start(const doctest::SubcaseSignature& /*signature*/) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData& /*data*/) override {}
  void log_message(const doctest::MessageData& /*data*/) override {}
  void test_case_skipped(const doctest::TestCaseData& /*data*/) override {}
};

// NOLINTNEXTLINE(cert-err58-cpp): doctest's registration, as its own reporters make
DOCTEST_REGISTER_LISTENER("crema-match-counter", 1, match_counter);

bool asks_by_name(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument(argv[i]);
    for (const std::string_view option : {"--test-case=", "-tc=", "--dt-test-case=", "--dt-tc="}) {
      if (argument.starts_with(option)) return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) return result;  // --help, --list-test-cases and the like
  if (cases_matched == 0 && asks_by_name(argc, argv)) {
    std::fputs(
        "crema: no test case has the name asked for; a name with a ';' cannot pass "
        "through CTest, which splits it\n",
        stderr);
    return 1;
  }
  return result;
}
