// run/load_target.cc: one entry point for a load on a server or on the simulator (load_target.h).
#include "run/load_target.h"

#include "run/simulate.h"
#include "target/discovery.h"

namespace bakeoff::run {

Result<BenchOutcome> RunLoadJob(const LoadTarget& target, LoadJob job, const std::atomic<bool>& stop,
                                const std::function<void(const std::string&)>& log) {
  if (target.simulated) {
    SimulateConfig config;
    config.run = std::move(job.run);
    config.sim = target.sim;
    config.preset = target.preset;
    config.slo = std::move(job.slo);
    config.out_dir = std::move(job.out_dir);
    config.flags = std::move(job.flags);
    config.trace = std::move(job.trace);
    return RunSimulate(config, stop, log);
  }
  BenchConfig config;
  config.run = std::move(job.run);
  Result<net::Endpoint> endpoint = net::ParseEndpoint(target.url);
  if (!endpoint.ok()) return endpoint.error();
  target::StripApiVersionSuffix(endpoint.value());
  config.run.target.endpoint = endpoint.value();
  config.run.target.client = target.client;
  config.intent = FitRequestToEngine(config.run.target.request, target.adapter);
  config.url = target.url;
  config.adapter = target.adapter;
  config.metrics_path = target.metrics_path;
  config.engine_pid = target.engine_pid;
  config.price_per_hour = target.price_per_hour;
  config.slo = std::move(job.slo);
  config.out_dir = std::move(job.out_dir);
  config.flags = std::move(job.flags);
  config.trace = std::move(job.trace);
  return RunBench(std::move(config), stop, log, nullptr);
}

}  // namespace bakeoff::run
