// cli/emulate_command.cc: `bakeoff emulate`: serves the emulated engine (emulate/server.h) until
// SIGINT or SIGTERM. Flags map onto EmulatorConfig; an engine preset (--preset) gives the engine
// settings first and the engine flags the user actually typed override it. docs/emulator.md
// describes every flag, the log lines and the signal behaviour.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cli/cli.h"
#include "emulate/engine_preset.h"
#include "emulate/server.h"
#include "net/http_client.h"

namespace bakeoff::cli {

namespace {

// --write-threads 0: half the CPUs this process may run on (its affinity, so a server pinned to
// one CPU writes from one thread), at least 1 and at most 4.
int AutoWriteThreads() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (::sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return 1;
  return std::clamp(CPU_COUNT(&cpus) / 2, 1, 4);
}

struct EmulateFlags {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string unix_socket;
  std::string model = std::string(emulate::kDefaultServedModelName);
  std::string preset;
  long long max_num_seqs = 256;
  long long max_batched_tokens = 8192;
  long long max_model_len = 32768;
  bool slots_keep_kv = false;
  double base_ms = 6.0;
  double multi_token_ms = 0;
  double prefill_ms_per_token = 0.06;
  double prefill_ms_per_1m_pairs = 0;
  bool whole_batch_attention = false;
  double decode_ms_per_seq = 0.08;
  double decode_ms_per_1m_pairs = 0;
  double kv_ms_per_1k_tokens = 0.04;
  double grammar_ms_per_token = 0.05;
  double lora_load_ms = 25.0;
  long long max_loras = 4;
  std::vector<std::string> lora_adapters;
  double eos_probability = 0.0;
  unsigned long long seed = 0;
  double startup_download_s = 0.0;
  double startup_load_s = 0.0;  // also --load-delay
  double startup_compile_s = 0.0;
  double startup_warmup_s = 0.0;
  bool instant = false;
  long long max_waiting = 0;
  std::string on_sigterm = "drain";
  double drain_timeout_s = 30.0;
  bool usage_always = false;
  long long tokens_per_event = 1;
  long long write_threads = 0;  // 0: auto
  bool no_io_uring = false;
  double keepalive_comments_ms = 0.0;
  double fault_error_rate = 0.0;
  double fault_stall_ms = 0.0;
  double fault_stall_rate = 0.0;
  long long fault_crash_after = 0;
  long long fault_slow_after = 0;
  double fault_slow_factor = 2.0;
  bool fault_health_lies = false;
  bool fault_no_done = false;
  double fault_stream_error_rate = 0.0;
  bool fault_ignore_disconnect = false;
  double fault_health_busy_delay_ms = 0.0;
  double fault_health_late_ms = 0.0;
  int not_ready_status = 503;
  bool fault_bad_input_500 = false;
  bool fault_truncate_prompts = false;
  bool fault_nondeterministic = false;
  bool fault_ignore_stop = false;
  bool fault_cut_utf8 = false;
  bool no_metrics = false;
  bool no_pooling = false;
  std::string answers_file;
  // Engine flags the user typed (their long names), so only they override a preset.
  std::set<std::string> given;
};

// Returns an empty string when valid, otherwise a one-line message naming the flag.
std::string CheckFlags(const EmulateFlags& f) {
  auto bad = [](const char* flag, const std::string& rule, const std::string& value) {
    return std::string(flag) + " " + rule + " (got " + value + ")";
  };
  if (f.port < 0 || f.port > 65535) return bad("--port", "must be in [0, 65535]", std::to_string(f.port));
  if (f.unix_socket.size() > net::kMaxUnixSocketPath) {
    return bad("--unix-socket", "must be at most " + std::to_string(net::kMaxUnixSocketPath) + " bytes long", f.unix_socket);
  }
  if (f.model.empty()) return "--model must not be empty";
  if (f.max_num_seqs < 1) return bad("--max-num-seqs", "must be >= 1", std::to_string(f.max_num_seqs));
  if (f.max_model_len < 2) return bad("--max-model-len", "must be >= 2", std::to_string(f.max_model_len));
  if (f.max_batched_tokens < 1) {
    return bad("--max-batched-tokens", "must be >= 1", std::to_string(f.max_batched_tokens));
  }
  const struct {
    const char* flag;
    double value;
  } non_negative[] = {{"--base-ms", f.base_ms},
                      {"--multi-token-ms", f.multi_token_ms},
                      {"--prefill-ms-per-token", f.prefill_ms_per_token},
                      {"--prefill-ms-per-1m-pairs", f.prefill_ms_per_1m_pairs},
                      {"--decode-ms-per-seq", f.decode_ms_per_seq},
                      {"--kv-ms-per-1k-tokens", f.kv_ms_per_1k_tokens},
                      {"--grammar-ms-per-token", f.grammar_ms_per_token},
                      {"--lora-load-ms", f.lora_load_ms},
                      {"--startup-download", f.startup_download_s},
                      {"--startup-load", f.startup_load_s},
                      {"--startup-compile", f.startup_compile_s},
                      {"--startup-warmup", f.startup_warmup_s},
                      {"--drain-timeout", f.drain_timeout_s},
                      {"--keepalive-comments-ms", f.keepalive_comments_ms},
                      {"--fault-stall-ms", f.fault_stall_ms},
                      {"--fault-health-busy-delay-ms", f.fault_health_busy_delay_ms},
                      {"--fault-health-late-ms", f.fault_health_late_ms}};
  for (const auto& c : non_negative) {
    if (!std::isfinite(c.value) || c.value < 0) {
      return bad(c.flag, "must be a finite number >= 0", fmt::format("{}", c.value));
    }
  }
  const struct {
    const char* flag;
    double value;
  } probabilities[] = {{"--eos-probability", f.eos_probability},
                       {"--fault-error-rate", f.fault_error_rate},
                       {"--fault-stall-rate", f.fault_stall_rate},
                       {"--fault-stream-error-rate", f.fault_stream_error_rate}};
  for (const auto& p : probabilities) {
    if (!(p.value >= 0 && p.value <= 1)) return bad(p.flag, "must be in [0, 1]", fmt::format("{}", p.value));
  }
  if (f.max_waiting < 0) return bad("--max-waiting", "must be >= 0", std::to_string(f.max_waiting));
  if (f.tokens_per_event < 1) {
    return bad("--tokens-per-event", "must be >= 1", std::to_string(f.tokens_per_event));
  }
  if (f.write_threads < 0 || f.write_threads > emulate::kMaxWriteThreads) {
    return bad("--write-threads", fmt::format("must be in [0, {}] (0: auto)", emulate::kMaxWriteThreads),
               std::to_string(f.write_threads));
  }
  if (f.fault_crash_after < 0) {
    return bad("--fault-crash-after", "must be >= 0", std::to_string(f.fault_crash_after));
  }
  if (f.fault_slow_after < 0) {
    return bad("--fault-slow-after", "must be >= 0", std::to_string(f.fault_slow_after));
  }
  if (!(f.fault_slow_factor > 0 && f.fault_slow_factor <= 100)) {
    return bad("--fault-slow-factor", "must be in (0, 100]", fmt::format("{}", f.fault_slow_factor));
  }
  if (f.on_sigterm != "drain" && f.on_sigterm != "abort" && f.on_sigterm != "exit" &&
      f.on_sigterm != "cut" && f.on_sigterm != "crash" && f.on_sigterm != "ignore") {
    return bad("--on-sigterm", "must be drain, abort, exit, cut, crash or ignore", f.on_sigterm);
  }
  if (f.not_ready_status < 200 || f.not_ready_status > 599) {
    return bad("--not-ready-status", "must be in [200, 599]", std::to_string(f.not_ready_status));
  }
  return {};
}

// The engine settings: the preset's (if any), then every engine flag the user gave (all of them
// without a preset, whose defaults are EngineConfig's).
Result<emulate::EngineConfig> BuildEngine(const EmulateFlags& f) {
  emulate::EngineConfig engine;
  const bool preset = !f.preset.empty();
  if (preset) {
    auto file = emulate::ResolveEnginePreset(f.preset, EnginePresetsDir());
    if (!file.ok()) return MakeError(file.error().code, "--preset: " + file.error().message);
    auto loaded = emulate::LoadEnginePreset(*file);
    if (!loaded.ok()) return MakeError(loaded.error().code, "--preset: " + loaded.error().message);
    engine = loaded->config;
  }
  auto use = [&](std::string_view flag) { return !preset || f.given.count(std::string(flag)) > 0; };
  if (use("--max-num-seqs")) engine.max_num_seqs = f.max_num_seqs;
  if (use("--max-batched-tokens")) engine.max_batched_tokens = f.max_batched_tokens;
  if (use("--max-model-len")) engine.max_model_len = f.max_model_len;
  if (use("--slots-keep-kv")) engine.slots_keep_kv = f.slots_keep_kv;
  if (use("--base-ms")) engine.cost.base_ms = f.base_ms;
  if (use("--multi-token-ms")) engine.cost.multi_token_ms = f.multi_token_ms;
  if (use("--prefill-ms-per-token")) engine.cost.prefill_ms_per_token = f.prefill_ms_per_token;
  if (use("--prefill-ms-per-1m-pairs")) engine.cost.prefill_ms_per_1m_pairs = f.prefill_ms_per_1m_pairs;
  if (use("--whole-batch-attention")) engine.cost.whole_batch_attention = f.whole_batch_attention;
  if (use("--decode-ms-per-seq")) engine.cost.decode_ms_per_seq = f.decode_ms_per_seq;
  if (use("--decode-ms-per-1m-pairs")) engine.cost.decode_ms_per_1m_pairs = f.decode_ms_per_1m_pairs;
  if (use("--kv-ms-per-1k-tokens")) engine.cost.kv_ms_per_1k_tokens = f.kv_ms_per_1k_tokens;
  if (use("--grammar-ms-per-token")) engine.cost.grammar_ms_per_token = f.grammar_ms_per_token;
  if (use("--lora-load-ms")) engine.cost.lora_load_ms = f.lora_load_ms;
  if (use("--max-loras")) engine.max_loras = f.max_loras;
  if (use("--eos-probability")) engine.eos_probability = f.eos_probability;
  if (use("--seed")) engine.seed = f.seed;
  if (engine.max_batched_tokens < engine.max_num_seqs) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("--max-batched-tokens must be >= --max-num-seqs (got {} < {})",
                                 engine.max_batched_tokens, engine.max_num_seqs));
  }
  Status valid = emulate::ValidateEngineConfig(engine);
  if (!valid.ok()) {
    return MakeError(ErrorCode::kInvalidInput,
                     (preset ? "engine settings (--preset and flags): " : "engine settings: ") +
                         valid.error().message);
  }
  return engine;
}

// stdout lines from two threads (the start-up log comes from the server's I/O thread), each
// written whole and flushed so a parent process sees it at once.
class LineWriter {
 public:
  void Write(std::string_view line) {
    std::lock_guard<std::mutex> lock(mutex_);
    WriteLocked(line);
  }
  void WriteLocked(std::string_view line) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  std::mutex& mutex() { return mutex_; }

 private:
  std::mutex mutex_;
};

// Async-signal-safe enough for the crash path: one write(2), no stdio.
void WriteStderr(std::string_view text) {
  ssize_t ignored = ::write(2, text.data(), text.size());
  (void)ignored;
}

int RunEmulate(const EmulateFlags& f) {
  if (std::string problem = CheckFlags(f); !problem.empty()) {
    std::fprintf(stderr, "bakeoff emulate: %s\n", problem.c_str());
    return kExitUsage;
  }
  auto engine = BuildEngine(f);
  if (!engine.ok()) {
    std::fprintf(stderr, "bakeoff emulate: %s\n", engine.error().message.c_str());
    return engine.error().code == ErrorCode::kIo ? kExitFailure : kExitUsage;
  }
  emulate::EmulatorConfig config;
  if (!f.answers_file.empty()) {
    auto answers = emulate::LoadAnswers(f.answers_file);
    if (!answers.ok()) {
      std::fprintf(stderr, "bakeoff emulate: --answers: %s\n", answers.error().message.c_str());
      return kExitUsage;
    }
    config.answers = std::move(answers).value();
  }
  LineWriter out;
  config.host = f.host;
  config.port = static_cast<std::uint16_t>(f.port);
  config.unix_socket = f.unix_socket;
  config.served_model_name = f.model;
  config.lora_adapters = f.lora_adapters;
  config.engine = *engine;
  config.startup.download = FromSeconds(f.startup_download_s);
  config.startup.load = FromSeconds(f.startup_load_s);
  config.startup.compile = FromSeconds(f.startup_compile_s);
  config.startup.warmup = FromSeconds(f.startup_warmup_s);
  config.instant = f.instant;
  config.max_waiting = f.max_waiting;
  config.usage_always = f.usage_always;
  config.tokens_per_event = f.tokens_per_event;
  config.write_threads = f.write_threads > 0 ? static_cast<int>(f.write_threads) : AutoWriteThreads();
  config.io_uring_writes = !f.no_io_uring;
  config.keepalive_comments = FromMillis(f.keepalive_comments_ms);
  config.faults.error_rate = f.fault_error_rate;
  config.faults.stall = FromMillis(f.fault_stall_ms);
  config.faults.stall_rate = f.fault_stall_rate;
  config.faults.crash_after = static_cast<std::uint64_t>(f.fault_crash_after);
  config.faults.slow_after = static_cast<std::uint64_t>(f.fault_slow_after);
  config.faults.slow_factor = f.fault_slow_factor;
  config.faults.health_lies = f.fault_health_lies;
  config.faults.no_done = f.fault_no_done;
  config.faults.stream_error_rate = f.fault_stream_error_rate;
  config.faults.ignore_disconnect = f.fault_ignore_disconnect;
  config.faults.health_busy_delay = FromMillis(f.fault_health_busy_delay_ms);
  config.faults.health_late = FromMillis(f.fault_health_late_ms);
  config.faults.bad_input_500 = f.fault_bad_input_500;
  config.faults.truncate_prompts = f.fault_truncate_prompts;
  config.faults.nondeterministic = f.fault_nondeterministic;
  config.faults.ignore_stop = f.fault_ignore_stop;
  config.faults.cut_utf8 = f.fault_cut_utf8;
  config.not_ready_status = f.not_ready_status;
  config.no_metrics = f.no_metrics;
  config.no_pooling = f.no_pooling;
  config.faults.seed = engine->seed;  // --seed, or the preset's seed
  config.log = [&out](std::string_view line) { out.Write(line); };
  config.on_crash = [] {
    WriteStderr("bakeoff emulate: fault --fault-crash-after: exiting abruptly (status 1)\n");
    std::_Exit(kExitFailure);
  };

  // Block the stop signals before the server thread exists, so it inherits the mask and only
  // sigwait() below sees them. A vanished client must not kill the server either.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  {
    // Held until the listening line is out, so it is always the first line (the I/O thread's
    // start-up lines wait for it).
    std::unique_lock<std::mutex> first_line(out.mutex());
    auto started = emulate::EmulatorServer::Start(config);
    if (!started.ok()) {
      first_line.unlock();
      std::fprintf(stderr, "bakeoff emulate: %s\n", started.error().message.c_str());
      return started.error().code == ErrorCode::kInvalidInput ? kExitUsage : kExitFailure;
    }
    std::unique_ptr<emulate::EmulatorServer> server = std::move(started).value();
    const std::string label =
        f.preset.empty() ? "emulated engine" : fmt::format("emulated engine, preset {}", engine->name);
    net::Endpoint listening;
    listening.host = f.host;
    listening.port = std::to_string(server->port());
    listening.unix_socket = f.unix_socket;
    out.WriteLocked(fmt::format("bakeoff emulate ({}) listening on {}", label, listening.ToString()));
    if (!f.no_io_uring && !server->unbatched_writes().empty()) {
      out.WriteLocked(fmt::format("bakeoff emulate: a step's writes go one sendmsg each ({}); at many streams the "
                                  "step lag grows by about 2 us a stream",
                                  server->unbatched_writes()));
    }
    first_line.unlock();

    int signal_number = 0;
    for (;;) {
      sigwait(&stop_signals, &signal_number);
      if (signal_number != SIGTERM || f.on_sigterm != "ignore") break;
      out.Write("bakeoff emulate: sigterm mode=ignore (only SIGKILL or SIGINT stops it)");
    }
    if (signal_number != SIGTERM) {  // SIGINT: stop at once
      server->Stop();
      return kExitOk;
    }
    if (f.on_sigterm == "exit") {
      WriteStderr("bakeoff emulate: SIGTERM with --on-sigterm exit: exiting at once (status 1)\n");
      std::_Exit(kExitFailure);
    }
    if (f.on_sigterm == "crash") {
      WriteStderr("bakeoff emulate: SIGTERM with --on-sigterm crash: aborting (SIGABRT)\n");
      std::signal(SIGABRT, SIG_DFL);
      std::abort();
    }
    if (f.on_sigterm == "cut") {
      // Every connection closes at once: streams end with neither an error event nor [DONE].
      out.Write("bakeoff emulate: sigterm mode=cut");
      server->Stop();
      return kExitOk;
    }
    if (f.on_sigterm == "abort") {
      out.Write("bakeoff emulate: sigterm mode=abort");
      server->AbortAll();
    } else {
      out.Write(fmt::format("bakeoff emulate: sigterm mode=drain timeout={:.3f}", f.drain_timeout_s));
      server->BeginDrain(FromSeconds(f.drain_timeout_s));
    }
    // Wait for the shutdown to complete; a second SIGTERM or a SIGINT stops at once.
    for (;;) {
      if (server->WaitShutdown(std::chrono::milliseconds(50))) break;
      timespec no_wait{0, 0};
      if (sigtimedwait(&stop_signals, nullptr, &no_wait) > 0) break;
    }
    server->Stop();
    emulate::ShutdownReport report = server->WaitShutdown(Nanos{0}).value_or(emulate::ShutdownReport{});
    out.Write(fmt::format("bakeoff emulate: stopped mode={} finished={} cut={}", f.on_sigterm,
                          report.finished, report.cut));
  }
  return kExitOk;
}

}  // namespace

void AddEmulateCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<EmulateFlags>();
  auto* command = app.add_subcommand(
      "emulate", "Serve the built-in emulated engine (OpenAI-compatible API, modelled timing)");
  auto engine_options = std::make_shared<std::vector<std::pair<std::string, CLI::Option*>>>();
  auto engine_option = [&](const char* name, auto& value, const char* help) {
    CLI::Option* option = command->add_option(name, value, help)->capture_default_str();
    engine_options->emplace_back(name, option);
  };
  CLI::Option* host = command->add_option("--host", flags->host, "Address to bind")->capture_default_str();
  CLI::Option* port =
      command->add_option("--port", flags->port, "Port to listen on (0 = pick a free one)")->capture_default_str();
  command
      ->add_option("--unix-socket", flags->unix_socket,
                   "Listen on this Unix-domain socket file instead of a TCP port (as vLLM's --uds); clients "
                   "reach it as http+unix://%2Fpath%2Fto.sock")
      ->excludes(host)
      ->excludes(port);
  command->add_option("--model", flags->model, "Served model name")->capture_default_str();
  command->add_option("--preset", flags->preset,
                      "Engine preset: a name in the presets folder ($BAKEOFF_PRESETS_DIR or "
                      "examples/engines) or a .yaml file; engine flags given override it");
  engine_option("--max-num-seqs", flags->max_num_seqs, "Most sequences running at once");
  engine_option("--max-batched-tokens", flags->max_batched_tokens, "Token budget of one engine step");
  engine_option("--max-model-len", flags->max_model_len, "Context limit (prompt + output)");
  engine_option("--slots-keep-kv", flags->slots_keep_kv,
                "true: each of the --max-num-seqs slots keeps its last request's KV until it takes another "
                "(least recently used first), attended under --whole-batch-attention (llama.cpp's server)");
  engine_option("--base-ms", flags->base_ms, "Step cost: fixed ms per step");
  engine_option("--multi-token-ms", flags->multi_token_ms,
                "Step cost: extra fixed ms of a step computing more than one token (a matrix-matrix pass)");
  engine_option("--prefill-ms-per-token", flags->prefill_ms_per_token,
                "Step cost: ms per prompt token prefilled");
  engine_option("--prefill-ms-per-1m-pairs", flags->prefill_ms_per_1m_pairs,
                "Step cost: ms per million query-key pairs of prefill attention (grows with the prompt's square)");
  engine_option("--whole-batch-attention", flags->whole_batch_attention,
                "Step cost: count those pairs against every KV token of the step's batch, other sequences' too "
                "(true: a unified cache attended whole, as llama.cpp on a CPU)");
  engine_option("--decode-ms-per-seq", flags->decode_ms_per_seq, "Step cost: ms per decoding sequence");
  engine_option("--decode-ms-per-1m-pairs", flags->decode_ms_per_1m_pairs,
                "Step cost: ms per million pairs of a decoding token and a KV token of the step (every stream's, "
                "so the step grows with the streams' square)");
  engine_option("--kv-ms-per-1k-tokens", flags->kv_ms_per_1k_tokens,
                "Step cost: ms per 1000 KV-cache tokens attended");
  engine_option("--grammar-ms-per-token", flags->grammar_ms_per_token,
                "Step cost: ms per decoding sequence under a grammar (structured output, tool calls)");
  engine_option("--lora-load-ms", flags->lora_load_ms, "Step cost: ms per LoRA adapter loaded into a slot");
  engine_option("--max-loras", flags->max_loras, "LoRA adapters resident at once (least recently used evicted)");
  command->add_option("--lora-adapters", flags->lora_adapters,
                      "LoRA adapter names served beside --model (comma-separated); a request naming one runs with it")
      ->delimiter(',');
  engine_option("--eos-probability", flags->eos_probability,
                "Chance per token of an early EOS (honours min_tokens, ignore_eos)");
  engine_option("--seed", flags->seed, "Seed of the EOS, noise and fault draws");
  command->add_option("--startup-download", flags->startup_download_s,
                      "Start-up stage: seconds 'downloading' (emulated)")
      ->capture_default_str();
  command->add_option("--startup-load,--load-delay", flags->startup_load_s,
                      "Start-up stage: seconds 'loading weights' (emulated)")
      ->capture_default_str();
  command->add_option("--startup-compile", flags->startup_compile_s,
                      "Start-up stage: seconds 'compiling' (emulated)")
      ->capture_default_str();
  command->add_option("--startup-warmup", flags->startup_warmup_s,
                      "Start-up stage: seconds 'warming up' (emulated)")
      ->capture_default_str();
  command->add_flag("--instant", flags->instant,
                    "Ignore the cost model; stream every token as fast as possible");
  command->add_option("--max-waiting", flags->max_waiting,
                      "Answer 503 to a request arriving while this many wait (0 = no limit)")
      ->capture_default_str();
  command
      ->add_option("--on-sigterm", flags->on_sigterm,
                   "SIGTERM: drain (finish in-flight, refuse new), abort (end in-flight with an "
                   "error), exit (unclean, status 1), cut (close every connection silently, "
                   "status 0), crash (SIGABRT) or ignore (only SIGKILL/SIGINT stop it)")
      ->capture_default_str();
  command->add_option("--drain-timeout", flags->drain_timeout_s,
                      "Seconds a drain waits for in-flight requests before cutting them")
      ->capture_default_str();
  command->add_flag("--usage-always", flags->usage_always,
                    "Send the usage chunk on every stream, asked for or not");
  command->add_option("--tokens-per-event", flags->tokens_per_event, "Output tokens per SSE event")
      ->capture_default_str();
  command->add_option("--write-threads", flags->write_threads,
                      "Threads writing each engine step's tokens to the streams (0 = auto: half the CPUs "
                      "this process may run on, 1 to 4)")
      ->capture_default_str();
  command->add_flag("--no-io-uring", flags->no_io_uring,
                    "Write each step's tokens with one sendmsg a stream instead of io_uring batches");
  command->add_option("--keepalive-comments-ms", flags->keepalive_comments_ms,
                      "SSE ': keep-alive' comment after this many ms of stream silence (0 = off)")
      ->capture_default_str();
  command->add_option("--fault-error-rate", flags->fault_error_rate,
                      "Fault: share of generation requests failing with 500 before streaming")
      ->capture_default_str();
  command->add_option("--fault-stall-ms", flags->fault_stall_ms,
                      "Fault: how long a stalled stream pauses mid-way")
      ->capture_default_str();
  command->add_option("--fault-stall-rate", flags->fault_stall_rate,
                      "Fault: share of streams that stall mid-way")
      ->capture_default_str();
  command->add_option("--fault-crash-after", flags->fault_crash_after,
                      "Fault: exit abruptly (status 1) when the N-th generation request arrives")
      ->capture_default_str();
  command->add_option("--fault-slow-after", flags->fault_slow_after,
                      "Fault: from the N-th generation request on, every step takes --fault-slow-factor times as long "
                      "(0 = never)")
      ->capture_default_str();
  command->add_option("--fault-slow-factor", flags->fault_slow_factor,
                      "Fault: how much longer every step takes after --fault-slow-after (below 1: faster)")
      ->capture_default_str();
  command->add_flag("--fault-health-lies", flags->fault_health_lies,
                    "Fault: /health says 200 during start-up while the API still answers 503");
  command->add_flag("--fault-no-done", flags->fault_no_done, "Quirk: streams end without [DONE]");
  command->add_option("--fault-stream-error-rate", flags->fault_stream_error_rate,
                      "Fault: share of streams that send an error event mid-way and end")
      ->capture_default_str();
  command->add_flag("--fault-ignore-disconnect", flags->fault_ignore_disconnect,
                    "Fault: a client's disconnect does not abort its sequence; it runs to the end");
  command
      ->add_option("--fault-health-busy-delay-ms", flags->fault_health_busy_delay_ms,
                   "Fault: while anything runs, /health answers only after this many ms (or "
                   "when idle)")
      ->capture_default_str();
  command
      ->add_option("--not-ready-status", flags->not_ready_status,
                   "Status /health answers before ready (not 503: body {\"status\":\"loading\"})")
      ->capture_default_str();
  command
      ->add_option("--fault-health-late-ms", flags->fault_health_late_ms,
                   "Fault: /health says ready only this many ms after the API serves")
      ->capture_default_str();
  command->add_flag("--fault-bad-input-500", flags->fault_bad_input_500,
                    "Fault: invalid request bodies get 500 instead of 400");
  command->add_flag("--fault-truncate-prompts", flags->fault_truncate_prompts,
                    "Fault: over-long prompts are silently left-truncated instead of a 400");
  command->add_flag("--fault-nondeterministic", flags->fault_nondeterministic,
                    "Fault: the same prompt and seed give a different text every time");
  command->add_flag("--fault-ignore-stop", flags->fault_ignore_stop,
                    "Fault: stop strings are ignored");
  command->add_flag("--fault-cut-utf8", flags->fault_cut_utf8,
                    "Fault: text cut inside multibyte UTF-8 characters: every streamed token, error messages and "
                    "an extra /v1/models id (the raw bytes are not UTF-8)");
  command->add_flag("--no-metrics", flags->no_metrics, "GET /metrics answers 404");
  command->add_flag("--no-pooling", flags->no_pooling,
                    "POST /v1/embeddings, /v1/rerank and /rerank answer 404 (no pooling routes)");
  command->add_option(
      "--answers", flags->answers_file,
      "JSONL of {\"prompt\",\"answer\"}: a request with that prompt (completions) or "
      "last user message (chat) outputs that answer");
  command->callback([flags, engine_options, exit_code] {
    for (const auto& [name, option] : *engine_options) {
      if (option->count() > 0) flags->given.insert(name);
    }
    *exit_code = RunEmulate(*flags);
  });
}

}  // namespace bakeoff::cli
