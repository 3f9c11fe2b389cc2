// cli/simulate_setup.cc: the load and engine-model flags of simulate and plan (simulate_setup.h).
#include "cli/simulate_setup.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "emulate/engine_preset.h"
#include "emulate/server.h"

namespace bakeoff::cli {

void AddEngineModelOptions(CLI::App& c, EngineModelFlags& flags) {
  c.add_option("--preset", flags.preset,
               "Engine preset: a name in the presets folder (examples/engines) or a YAML file")
      ->capture_default_str();
  c.add_option("--affinity-tokens", flags.affinity_tokens,
               "prefix-affinity: leading prompt tokens hashed to pick the replica")
      ->capture_default_str();
  c.add_option("--max-waiting", flags.max_waiting, "Requests a replica queues before answering 503 (0 = no limit)")
      ->capture_default_str();
  c.add_option("--drain-timeout", flags.drain_timeout,
               "As bench: requests still running this long after the last send are given up (recorded cancelled)")
      ->capture_default_str();
  c.add_option("--idle-timeout", flags.idle_timeout,
               "As bench: a stream with no token this long (queued, or between tokens) is given up (timeout)")
      ->capture_default_str();
  c.add_option("--first-byte-timeout", flags.first_byte_timeout,
               "As bench: a whole (--no-stream) answer not there this long after the send is given up")
      ->capture_default_str();
  c.add_option("--request-timeout", flags.request_timeout, "As bench: the longest whole request")
      ->capture_default_str();
}

Result<run::SimulateConfig> BuildSimulateConfig(const LoadFlags& load, const EngineModelFlags& engine,
                                                const std::string& command) {
  auto usage = [](std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); };
  Result<LoadSetup> setup = BuildLoad(load, command);
  if (!setup.ok()) return setup.error();
  run::SimulateConfig config;
  config.run.target.request = setup->request;
  if (!setup->variant.empty()) {
    return usage(
        "the simulator models no grammars or adapters: --structured and --lora-adapters need a "
        "server "
        "(bakeoff emulate, then bench)");
  }
  // The server would answer any other name 404 (emulate/openai_request.cc): so must the simulator.
  std::string& model = config.run.target.request.model;
  if (model.empty()) model = std::string(emulate::kDefaultServedModelName);
  if (model != emulate::kDefaultServedModelName) {
    return usage(fmt::format("--model: the simulated engine serves '{}', and the emulated server would answer '{}' "
                             "with 404 model not found (leave --model out)",
                             emulate::kDefaultServedModelName, model));
  }
  config.run.shape = setup->shape;
  config.run.steps = setup->steps;
  config.run.seed = load.seed;
  config.trace = setup->trace;
  config.slo = setup->slo;
  config.out_dir = setup->out_dir;

  Result<std::filesystem::path> file = emulate::ResolveEnginePreset(engine.preset, EnginePresetsDir());
  if (!file.ok()) return usage("--preset: " + file.error().message);
  Result<emulate::EnginePreset> preset = emulate::LoadEnginePreset(file.value());
  if (!preset.ok()) return usage("--preset: " + preset.error().message);
  config.sim.engine = preset->config;
  config.preset = preset->config.name == engine.preset ? engine.preset
                                                       : fmt::format("{} ({})", preset->config.name, engine.preset);
  if (engine.affinity_tokens < 1) return usage("--affinity-tokens: must be at least 1");
  config.sim.affinity_tokens = engine.affinity_tokens;
  if (engine.max_waiting < 0) return usage("--max-waiting: must be 0 (no limit) or more");
  config.sim.max_waiting = engine.max_waiting;
  net::Deadlines& deadlines = config.run.target.client.deadlines;
  Status durations =
      ParsePositiveDurations({DurationFlag{"--drain-timeout", &engine.drain_timeout, &config.run.drain_timeout},
                              DurationFlag{"--idle-timeout", &engine.idle_timeout, &deadlines.idle},
                              DurationFlag{"--first-byte-timeout", &engine.first_byte_timeout, &deadlines.first_byte},
                              DurationFlag{"--request-timeout", &engine.request_timeout, &deadlines.total}});
  if (!durations.ok()) return durations.error();

  config.flags = LoadFlagsJson(load, setup.value());
  config.flags.update({{"preset", engine.preset},
                       {"affinity_tokens", engine.affinity_tokens},
                       {"max_waiting", engine.max_waiting},
                       {"drain_timeout", engine.drain_timeout},
                       {"idle_timeout", engine.idle_timeout},
                       {"first_byte_timeout", engine.first_byte_timeout},
                       {"request_timeout", engine.request_timeout},
                       {"engine", emulate::RenderEnginePreset(preset.value())}});
  return config;
}

}  // namespace bakeoff::cli
