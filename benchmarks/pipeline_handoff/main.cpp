#include "common/ratio_report.hpp"

int main(int argc, char** argv) {
  return crema::bench::run_with_ratios(argc, argv, "pipeline_handoff");
}
