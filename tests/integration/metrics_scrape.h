// Reading a test daemon's Prometheus metrics: where it serves them, one
// scrape over a plain loopback socket, and the value of one metric.
#ifndef RDMAD_TESTS_INTEGRATION_METRICS_SCRAPE_H_
#define RDMAD_TESTS_INTEGRATION_METRICS_SCRAPE_H_

#include <map>
#include <string>

namespace rdmad::testing {

using Labels = std::map<std::string, std::string>;

// The metrics address a daemon logged ("metrics on http://H:P/metrics"),
// waiting for it up to 30 s; "" if it never came.
std::string MetricsAddress(const std::string& log);

// GET http://ADDRESS/metrics over a plain loopback socket; the body, or ""
// on any failure.
std::string Scrape(const std::string& address);

// Sum of the samples of `name` whose labels include all of `want`; -1 if
// there is none.
double Value(const std::string& scrape, const std::string& name,
             const Labels& want = {});

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_METRICS_SCRAPE_H_
