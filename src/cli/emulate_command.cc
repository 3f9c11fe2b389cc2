// cli/emulate_command.cc: `bakeoff emulate`: serves the emulated engine (emulate/server.h) until
// SIGINT or SIGTERM. Flags map one to one onto EmulatorConfig; see docs/emulator.md.
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/cli.h"
#include "emulate/server.h"

namespace bakeoff::cli {

namespace {

struct EmulateFlags {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string model = "emulated-model";
  long long max_num_seqs = 256;
  long long max_batched_tokens = 8192;
  long long max_model_len = 32768;
  double base_ms = 6.0;
  double prefill_ms_per_token = 0.06;
  double decode_ms_per_seq = 0.08;
  double kv_ms_per_1k_tokens = 0.04;
  double eos_probability = 0.0;
  unsigned long long seed = 0;
  double load_delay_s = 0.0;
  bool instant = false;
};

// Returns an empty string when valid, otherwise a one-line message naming the flag.
std::string CheckFlags(const EmulateFlags& f) {
  auto bad = [](const char* flag, const std::string& rule, const std::string& value) {
    return std::string(flag) + " " + rule + " (got " + value + ")";
  };
  if (f.port < 0 || f.port > 65535) return bad("--port", "must be in [0, 65535]", std::to_string(f.port));
  if (f.model.empty()) return "--model must not be empty";
  if (f.max_num_seqs < 1) return bad("--max-num-seqs", "must be >= 1", std::to_string(f.max_num_seqs));
  if (f.max_batched_tokens < f.max_num_seqs) {
    return bad("--max-batched-tokens", "must be >= --max-num-seqs",
               std::to_string(f.max_batched_tokens));
  }
  if (f.max_model_len < 2) return bad("--max-model-len", "must be >= 2", std::to_string(f.max_model_len));
  const struct {
    const char* flag;
    double value;
  } coefficients[] = {{"--base-ms", f.base_ms},
                      {"--prefill-ms-per-token", f.prefill_ms_per_token},
                      {"--decode-ms-per-seq", f.decode_ms_per_seq},
                      {"--kv-ms-per-1k-tokens", f.kv_ms_per_1k_tokens},
                      {"--load-delay", f.load_delay_s}};
  for (const auto& c : coefficients) {
    if (!std::isfinite(c.value) || c.value < 0) {
      return bad(c.flag, "must be a finite number >= 0", fmt::format("{}", c.value));
    }
  }
  if (!(f.eos_probability >= 0 && f.eos_probability <= 1)) {
    return bad("--eos-probability", "must be in [0, 1]", fmt::format("{}", f.eos_probability));
  }
  return {};
}

int RunEmulate(const EmulateFlags& f) {
  if (std::string problem = CheckFlags(f); !problem.empty()) {
    std::fprintf(stderr, "bakeoff emulate: %s\n", problem.c_str());
    return kExitUsage;
  }
  emulate::EmulatorConfig config;
  config.host = f.host;
  config.port = static_cast<std::uint16_t>(f.port);
  config.served_model_name = f.model;
  config.engine.max_num_seqs = f.max_num_seqs;
  config.engine.max_batched_tokens = f.max_batched_tokens;
  config.engine.max_model_len = f.max_model_len;
  config.engine.cost = {f.base_ms, f.prefill_ms_per_token, f.decode_ms_per_seq,
                        f.kv_ms_per_1k_tokens};
  config.engine.eos_probability = f.eos_probability;
  config.engine.seed = f.seed;
  config.load_delay = FromSeconds(f.load_delay_s);
  config.instant = f.instant;

  // Block the stop signals before the server thread exists, so it inherits the mask and only
  // sigwait() below sees them. A vanished client must not kill the server either.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = emulate::EmulatorServer::Start(config);
  if (!server.ok()) {
    std::fprintf(stderr, "bakeoff emulate: %s\n", server.error().message.c_str());
    return server.error().code == ErrorCode::kInvalidInput ? kExitUsage : kExitFailure;
  }
  std::printf("bakeoff emulate (emulated engine) listening on http://%s:%u\n", f.host.c_str(),
              static_cast<unsigned>((*server)->port()));
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  (*server)->Stop();
  return kExitOk;
}

}  // namespace

void AddEmulateCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<EmulateFlags>();
  auto* command = app.add_subcommand(
      "emulate", "Serve the built-in emulated engine (OpenAI-compatible API, modelled timing)");
  command->add_option("--host", flags->host, "Address to bind")->capture_default_str();
  command->add_option("--port", flags->port, "Port to listen on (0 = pick a free one)")
      ->capture_default_str();
  command->add_option("--model", flags->model, "Served model name")->capture_default_str();
  command->add_option("--max-num-seqs", flags->max_num_seqs, "Most sequences running at once")
      ->capture_default_str();
  command->add_option("--max-batched-tokens", flags->max_batched_tokens,
                      "Token budget of one engine step")
      ->capture_default_str();
  command->add_option("--max-model-len", flags->max_model_len, "Context limit (prompt + output)")
      ->capture_default_str();
  command->add_option("--base-ms", flags->base_ms, "Step cost: fixed ms per step")
      ->capture_default_str();
  command->add_option("--prefill-ms-per-token", flags->prefill_ms_per_token,
                      "Step cost: ms per prompt token prefilled")
      ->capture_default_str();
  command->add_option("--decode-ms-per-seq", flags->decode_ms_per_seq,
                      "Step cost: ms per decoding sequence")
      ->capture_default_str();
  command->add_option("--kv-ms-per-1k-tokens", flags->kv_ms_per_1k_tokens,
                      "Step cost: ms per 1000 KV-cache tokens attended")
      ->capture_default_str();
  command->add_option("--eos-probability", flags->eos_probability,
                      "Chance per token of an early EOS (honours min_tokens, ignore_eos)")
      ->capture_default_str();
  command->add_option("--seed", flags->seed, "Seed of the EOS draws")->capture_default_str();
  command->add_option("--load-delay", flags->load_delay_s,
                      "Seconds after start during which /health answers 503")
      ->capture_default_str();
  command->add_flag("--instant", flags->instant,
                    "Ignore the cost model; stream every token as fast as possible");
  command->callback([flags, exit_code] { *exit_code = RunEmulate(*flags); });
}

}  // namespace bakeoff::cli
