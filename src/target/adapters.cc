// target/adapters.cc: one EngineAdapter per engine (contract in adapters.h). Section numbers
// refer to ../shared/reference/engine-interfaces.md; "live" facts to docs/engines/llama.cpp.md.
#include "target/adapters.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/ascii.h"
#include "core/json_dump.h"

namespace bakeoff::target {
namespace {

using A = dialect::Api;
using K = SignalKind;
using S = Signal;

std::vector<EngineAdapter> BuildAdapters() {
  std::vector<EngineAdapter> adapters;

  // ---- vLLM: sections 1.1-1.8, 10.x ----
  adapters.push_back(EngineAdapter{
      .name = "vllm",
      .display_name = "vLLM",
      .aliases = {"vllm-serve"},
      .dialect = "openai",
      .apis = {A::kChat, A::kCompletions, A::kEmbeddings, A::kRerank},
      .health = {{"/health",
                  "200 engine alive; 503 engine dead (then the process exits); "
                  "connection refused while the model loads",
                  {503}}},
      .version = {{"/version", VersionRead::kJsonField, "version", {}, ""}},
      .metrics_path = "/metrics",
      .metrics_port = "",
      .metrics_note = "on by default; prefix vllm:, labels model_name and engine",
      .metrics = {{S::kTtft, "vllm:time_to_first_token_seconds", K::kHistogram, "s", ""},
                  {S::kInterTokenLatency, "vllm:inter_token_latency_seconds", K::kHistogram, "s",
                   ""},
                  {S::kInterTokenLatency, "vllm:time_per_output_token_seconds", K::kHistogram, "s",
                   ""},
                  {S::kE2eLatency, "vllm:e2e_request_latency_seconds", K::kHistogram, "s", ""},
                  {S::kQueueTime, "vllm:request_queue_time_seconds", K::kHistogram, "s", ""},
                  {S::kRunning, "vllm:num_requests_running", K::kGauge, "requests", ""},
                  {S::kWaiting, "vllm:num_requests_waiting", K::kGauge, "requests", ""},
                  {S::kKvUsage, "vllm:kv_cache_usage_perc", K::kGauge, "fraction", ""},
                  {S::kKvUsage, "vllm:gpu_cache_usage_perc", K::kGauge, "fraction", ""},
                  {S::kPrefixCacheHits, "vllm:prefix_cache_hits", K::kCounter, "tokens", ""},
                  {S::kPromptTokens, "vllm:prompt_tokens", K::kCounter, "tokens", ""},
                  {S::kGenerationTokens, "vllm:generation_tokens", K::kCounter, "tokens", ""},
                  {S::kPreemptions, "vllm:num_preemptions", K::kCounter, "requests", ""}},
      .request = {"ignore_eos", "min_tokens", true,
                  "extra chunk with choices [] and usage when stream_options.include_usage "
                  "(off by default; --enable-force-include-usage forces it)",
                  false, dialect::RegexField::kStructuredOutputs},
      .launch = {"vllm serve {model}", "--port {port}", "--max-model-len {context}",
                 "on by default (V1); --no-enable-prefix-caching turns it off",
                 "--tensor-parallel-size {parallel}", "", 8000},
      .cold_start = {{"weights", "Loading weights took"},
                     {"model", "Model loading took"},
                     {"engine", "init engine \\(profile, create kv cache, warmup model\\) took"},
                     {"listen", "Starting vLLM (API )?server on"},
                     {"ready", "Application startup complete"}},
      .quirks = {"completions max_tokens defaults to 16",
                 "stream_options without stream: true is a validation error",
                 "older builds used the flat {object: error} error body",
                 "sampling defaults may come from the model's generation_config.json",
                 "SIGTERM aborts in-flight requests unless --shutdown-timeout (>= 0.18)"},
      .detect = {{"vllm"}, {}, {"vllm:"}, "", ""},
      .verified = Verified::kFixturesOnly,
      .verified_note = "",
      .reference = "engine-interfaces.md section 1",
  });

  // ---- SGLang: section 2 ----
  adapters.push_back(EngineAdapter{
      .name = "sglang",
      .display_name = "SGLang",
      .aliases = {},
      .dialect = "openai",
      .apis = {A::kChat, A::kCompletions, A::kEmbeddings},
      .health = {{"/health",
                  "503 until the warm-up request succeeded and during shutdown; 200 "
                  "after a real 1-token generation by default; refused while loading",
                  {503}, /*generates=*/true},
                 {"/health_generate", "same handler as /health in current builds", {503}, /*generates=*/true}},
      .version = {{"/get_server_info", VersionRead::kJsonField, "version", {"model_path"}, ""},
                  {"/server_info", VersionRead::kJsonField, "version", {"model_path"}, ""}},
      .metrics_path = "/metrics",
      .metrics_port = "",
      .metrics_note = "needs --enable-metrics; prefix sglang:",
      .metrics = {{S::kTtft, "sglang:time_to_first_token_seconds", K::kHistogram, "s", ""},
                  {S::kInterTokenLatency, "sglang:inter_token_latency_seconds", K::kHistogram, "s",
                   ""},
                  {S::kInterTokenLatency, "sglang:time_per_output_token_seconds", K::kHistogram,
                   "s", ""},
                  {S::kE2eLatency, "sglang:e2e_request_latency_seconds", K::kHistogram, "s", ""},
                  {S::kQueueTime, "sglang:queue_time_seconds", K::kHistogram, "s", ""},
                  {S::kRunning, "sglang:num_running_reqs", K::kGauge, "requests", ""},
                  {S::kWaiting, "sglang:num_queue_reqs", K::kGauge, "requests", ""},
                  {S::kKvUsage, "sglang:token_usage", K::kGauge, "fraction", ""},
                  {S::kPrefixCacheHits, "sglang:cache_hit_rate", K::kGauge, "rate", ""},
                  {S::kPromptTokens, "sglang:prompt_tokens", K::kCounter, "tokens", ""},
                  {S::kGenerationTokens, "sglang:generation_tokens", K::kCounter, "tokens", ""},
                  {S::kPreemptions, "sglang:num_retracted_requests", K::kCounter, "requests", ""}},
      .request = {"ignore_eos", "min_tokens", true,
                  "extra chunk when stream_options.include_usage (off by default; "
                  "--stream-response-default-include-usage)",
                  false, dialect::RegexField::kTopLevel},
      .launch = {"python -m sglang.launch_server --model-path {model}", "--port {port}",
                 "--context-length {context}",
                 "radix cache on by default; --disable-radix-cache turns it off",
                 "--tp-size {parallel}", "--enable-metrics", 30000},
      .cold_start = {{"weights", "Load weight end"},
                     {"cuda_graph", "Capture cuda graph end"},
                     {"ready", "The server is fired up and ready to roll"}},
      .quirks = {"/health runs a 1-token generation by default (a 1 s readiness probe adds load)",
                 "ITL histogram _count counts tokens, not requests",
                 "finish_reason may be \"abort\"",
                 "SIGTERM drains without a timeout unless SGL_FORCE_SHUTDOWN",
                 "503 \"The request queue is full.\" only with --max-queued-requests"},
      .detect = {{"sglang"}, {}, {"sglang:"}, "", ""},
      .verified = Verified::kFixturesOnly,
      .verified_note = "",
      .reference = "engine-interfaces.md section 2",
  });

  // ---- TensorRT-LLM (trtllm-serve): section 3 ----
  adapters.push_back(EngineAdapter{
      .name = "trtllm",
      .display_name = "TensorRT-LLM",
      .aliases = {"tensorrt-llm", "trtllm-serve", "tensorrt_llm"},
      .dialect = "openai",
      .apis = {A::kChat, A::kCompletions},
      .health = {{"/health", "200 ready; 503 \"LLM is unavailable\"; refused while loading", {503}},
                 {"/health_generate", "1-token chat: 200 or 500", {500}, /*generates=*/true}},
      .version = {{"/version", VersionRead::kJsonField, "version", {}, ""}},
      .metrics_path = "/prometheus/metrics",
      .metrics_port = "",
      .metrics_note = "Prometheus text only at /prometheus/metrics with return_perf_metrics; "
                      "/metrics is a JSON array of iteration stats that reading drains",
      .metrics = {{S::kTtft, "trtllm_time_to_first_token_seconds", K::kHistogram, "s", ""},
                  {S::kInterTokenLatency, "trtllm_time_per_output_token_seconds", K::kHistogram,
                   "s", ""},
                  {S::kE2eLatency, "trtllm_e2e_request_latency_seconds", K::kHistogram, "s", ""},
                  {S::kQueueTime, "trtllm_request_queue_time_seconds", K::kHistogram, "s", ""},
                  {S::kRunning, "trtllm_num_requests_running", K::kGauge, "requests", ""},
                  {S::kWaiting, "trtllm_num_requests_waiting", K::kGauge, "requests", ""},
                  {S::kKvUsage, "trtllm_kv_cache_utilization", K::kGauge, "fraction", ""},
                  {S::kPrefixCacheHits, "trtllm_kv_cache_hit_rate", K::kGauge, "rate", ""},
                  {S::kPromptTokens, "trtllm_prompt_tokens", K::kCounter, "tokens", ""},
                  {S::kGenerationTokens, "trtllm_generation_tokens", K::kCounter, "tokens", ""}},
      .request = {"ignore_eos", "min_tokens", true,
                  "usage when stream_options is sent (its include_usage defaults to true)", true},
      .launch = {"trtllm-serve {model}", "--port {port}", "--max_seq_len {context}",
                 "kv_cache_config.enable_block_reuse in the --extra_llm_api_options YAML",
                 "--tp_size {parallel}", "return_perf_metrics: true in the YAML", 8000},
      .cold_start = {},
      .quirks = {"unknown request fields are rejected with 400 (extra=forbid)",
                 "temperature unset means 1.0",
                 "any handler exception is a 400, including over-long prompts",
                 "disconnects are polled once a second (abort latency up to ~1 s)",
                 "no preemption metric (trtllm_num_paused_requests is the closest gauge)"},
      .detect = {{"tensorrt_llm"}, {}, {"trtllm_"}, "", ""},
      .verified = Verified::kFixturesOnly,
      .verified_note = "",
      .reference = "engine-interfaces.md section 3",
  });

  // ---- Triton (OpenAI frontend + KServe v2 generate): section 4 ----
  adapters.push_back(EngineAdapter{
      .name = "triton",
      .display_name = "Triton",
      .aliases = {"tritonserver"},
      .dialect = "openai (frontend); generate/generate_stream SSE without [DONE] on /v2",
      .apis = {A::kChat, A::kCompletions, A::kTritonGenerate, A::kKserveInfer, A::kEmbeddings},
      .health = {{"/health/ready",
                  "OpenAI frontend: 200 ready; 400 engine not ready; 500 none",
                  {400, 500}},
                 {"/v2/health/ready",
                  "core HTTP: 200 ready; 400 (not 503) when not ready; "
                  "refused while models load in mode none",
                  {400}},
                 {"/v2/health/live", "200 live", {400}}},
      .version = {{"/v2", VersionRead::kJsonField, "version", {"extensions"}, "triton"}},
      .metrics_path = "/metrics",
      .metrics_port = "8002",
      .metrics_note = "core metrics on :8002/metrics (--allow-metrics); latencies are cumulative "
                      "microsecond counters; the TTFT histogram (ms) needs "
                      "--metrics-config histogram_latencies=true",
      .metrics = {{S::kTtft, "nv_inference_first_response_histogram_ms", K::kHistogram, "ms", ""},
                  {S::kE2eLatency, "nv_inference_request_duration_us", K::kCounter, "us", ""},
                  {S::kQueueTime, "nv_inference_queue_duration_us", K::kCounter, "us", ""},
                  {S::kRunning, "nv_trt_llm_request_metrics", K::kGauge, "requests",
                   "request_type=\"active\""},
                  {S::kWaiting, "nv_inference_pending_request_count", K::kGauge, "requests", ""},
                  {S::kKvUsage, "nv_trt_llm_kv_cache_block_metrics", K::kGauge, "fraction",
                   "kv_cache_block_type=\"fraction\""}},
      .request = {"ignore_eos", "min_tokens", true,
                  "OpenAI frontend: usage chunk when stream_options.include_usage and the "
                  "backend emits num_input_tokens/num_output_tokens; generate: model-specific",
                  true},
      .launch = {"tritonserver --model-repository={model}", "--http-port {port}",
                 "max length in each model's config.pbtxt / model.json",
                 "in the backend's model config", "in the backend's model config",
                 "--allow-metrics --metrics-port 8002", 8000},
      .cold_start = {{"listen", "Started HTTPService at"}},
      .quirks = {"not-ready health is 400, not 503",
                 "OpenAI frontend: max_tokens defaults to 16 (--default-max-tokens)",
                 "OpenAI frontend errors are FastAPI {detail: ...} bodies; unknown fields rejected",
                 "generate_stream has no [DONE]; the stream ends when the final response is sent",
                 "SIGTERM waits for open connections up to --exit-timeout-secs (30)"},
      .detect = {{"Triton Inference Server"}, {}, {"nv_inference_", "nv_trt_llm_"}, "", ""},
      .verified = Verified::kFixturesOnly,
      .verified_note = "",
      .reference = "engine-interfaces.md section 4",
  });

  // ---- llama.cpp server: section 5; live: docs/engines/llama.cpp.md ----
  adapters.push_back(EngineAdapter{
      .name = "llama.cpp",
      .display_name = "llama.cpp",
      .aliases = {"llamacpp", "llama-server", "llama_cpp"},
      .dialect = "openai (+ native /completion: no [DONE], error: SSE lines)",
      .apis = {A::kChat, A::kCompletions, A::kEmbeddings, A::kRerank},
      .health = {{"/health",
                  "503 \"Loading model\" while loading (the listener is up); 200 "
                  "{\"status\":\"ok\"} when ready",
                  {503}}},
      .version = {{"/props", VersionRead::kJsonField, "build_info", {}, ""}},
      .metrics_path = "/metrics",
      .metrics_port = "",
      .metrics_note = "needs --metrics (501 otherwise); no latency histograms",
      .metrics = {{S::kRunning, "llamacpp:requests_processing", K::kGauge, "requests", ""},
                  {S::kWaiting, "llamacpp:requests_deferred", K::kGauge, "requests", ""},
                  {S::kKvUsage, "llamacpp:kv_cache_usage_ratio", K::kGauge, "fraction", ""},
                  {S::kPromptTokens, "llamacpp:prompt_tokens", K::kCounter, "tokens", ""},
                  {S::kGenerationTokens, "llamacpp:tokens_predicted", K::kCounter, "tokens", ""}},
      .request = {"ignore_eos", "", true,
                  "b4748 (live): usage on the last chunk with finish_reason, always; later "
                  "builds: a separate chunk, then gated on stream_options.include_usage",
                  false},
      .launch = {"llama-server -m {model}", "--host 127.0.0.1 --port {port}",
                 "-c {context} (split across --parallel slots)",
                 "per-slot prompt cache, on (cache_prompt); --cache-reuse N",
                 "-np {parallel} (slots; no tensor parallel)", "--metrics", 8080},
      .cold_start = {{"load", "model loaded"}, {"listen", "server is listening"}},
      .quirks = {"per-slot context is n_ctx / --parallel",
                 "stream errors are error: SSE lines after HTTP 200",
                 "no min_tokens: ignore_eos alone fixes the length (live, b4748) unless the "
                 "slot's context fills",
                 "unknown model names are served (live, b4748)",
                 "an over-long prompt is cut silently (live, b4748)",
                 "closes kept-alive connections after a streamed answer without saying so "
                 "(live, b4748)",
                 "no drain on SIGTERM"},
      .detect = {{"llamacpp"}, {"llama.cpp"}, {"llamacpp:"}, "", ""},
      .verified = Verified::kLive,
      .verified_note = "b4748 (c392e5094), 2026-12-01: detection by /props build_info and the "
                       "Server header, metric mapping and forced length (docs/engines/"
                       "llama.cpp.md)",
      .reference = "engine-interfaces.md section 5; docs/engines/llama.cpp.md",
  });

  // ---- Ollama: section 6 ----
  adapters.push_back(EngineAdapter{
      .name = "ollama",
      .display_name = "Ollama",
      .aliases = {},
      .dialect = "openai (+ native NDJSON /api/generate and /api/chat)",
      .apis = {A::kChat, A::kCompletions, A::kOllamaGenerate, A::kOllamaChat, A::kEmbeddings},
      .health = {{"/",
                  "200 \"Ollama is running\" as soon as it listens; says nothing about "
                  "models, which load lazily (GET /api/ps lists loaded ones)",
                  {}}},
      .version = {{"/api/version", VersionRead::kJsonField, "version", {}, ""}},
      .metrics_path = "",
      .metrics_port = "",
      .metrics_note = "no Prometheus endpoint; the native final object carries *_duration (ns)",
      .metrics = {},
      .request = {"", "", false,
                  "OpenAI routes: usage chunk when stream_options.include_usage; native: in "
                  "the final NDJSON object, always",
                  false},
      .launch = {"ollama serve (then ollama pull {model})", "OLLAMA_HOST=127.0.0.1:{port}",
                 "OLLAMA_CONTEXT_LENGTH={context} or options.num_ctx",
                 "managed by its llama-server runner", "OLLAMA_NUM_PARALLEL={parallel}", "", 11434},
      .cold_start = {{"listen", "Listening on"}, {"model_load", "llama-server started in"}},
      .quirks = {"no ignore_eos and no min_tokens: output length cannot be forced",
                 "OpenAI routes force temperature 1.0 when unset",
                 "chat history over the context is truncated silently",
                 "503 \"server busy\" past OLLAMA_MAX_QUEUE (512)",
                 "SIGTERM closes connections at once"},
      .detect = {{}, {}, {}, "Ollama is running", ""},
      .verified = Verified::kFixturesOnly,
      .verified_note = "",
      .reference = "engine-interfaces.md section 6",
  });

  // ---- TGI: section 7 ----
  adapters.push_back(EngineAdapter{
      .name = "tgi",
      .display_name = "TGI",
      .aliases = {"text-generation-inference"},
      .dialect = "openai (+ native generate_stream: data: without a space, no [DONE])",
      .apis = {A::kChat, A::kCompletions, A::kTgiGenerate},
      .health = {{"/health",
                  "200 healthy; 503 {error: unhealthy, error_type: healthcheck}; "
                  "refused until shards are warm",
                  {503}}},
      .version = {{"/info", VersionRead::kJsonField, "version", {"model_id"}, ""}},
      .metrics_path = "/metrics",
      .metrics_port = "",
      .metrics_note = "prefix tgi_ (no colon); also on --prometheus-port (9000)",
      .metrics = {{S::kInterTokenLatency, "tgi_request_mean_time_per_token_duration", K::kHistogram,
                   "s", ""},
                  {S::kE2eLatency, "tgi_request_duration", K::kHistogram, "s", ""},
                  {S::kQueueTime, "tgi_request_queue_duration", K::kHistogram, "s", ""},
                  {S::kRunning, "tgi_batch_current_size", K::kGauge, "requests", ""},
                  {S::kWaiting, "tgi_queue_size", K::kGauge, "requests", ""},
                  {S::kPromptTokens, "tgi_request_input_length", K::kHistogram, "tokens", ""},
                  {S::kGenerationTokens, "tgi_request_generated_tokens", K::kHistogram, "tokens",
                   ""}},
      .request = {"", "", false, "extra chunk with choices [] when stream_options.include_usage",
                  false, dialect::RegexField::kResponseFormatValue},
      .launch = {"text-generation-launcher --model-id {model}", "--port {port}",
                 "--max-total-tokens {context}",
                 "on by default (v3); PREFIX_CACHING=0 turns it off", "--num-shard {parallel}", "",
                 3000},
      .cold_start = {{"shards", "Shard ready in"},
                     {"warmup", "Warming up model"},
                     {"listen", "Connected"}},
      .quirks = {"no client-settable ignore_eos or min_tokens: output length cannot be forced",
                 "ITL is a per-request mean histogram",
                 "validation errors are 422, overload is 429 past --max-concurrent-requests",
                 "SSE lines are data:{...} without a space; keep-alive comment lines",
                 "maintenance mode upstream"},
      .detect = {{}, {}, {"tgi_"}, "", ""},
      .verified = Verified::kFixturesOnly,
      .verified_note = "",
      .reference = "engine-interfaces.md section 7",
  });

  // ---- LMDeploy: section 8 ----
  adapters.push_back(EngineAdapter{
      .name = "lmdeploy",
      .display_name = "LMDeploy",
      .aliases = {},
      .dialect = "openai",
      .apis = {A::kChat, A::kCompletions, A::kEmbeddings},
      .health = {{"/health",
                  "0.16: 200 healthy or sleeping; 503 initializing or unhealthy; "
                  "refused while the engine is built",
                  {503}}},
      .version = {},
      .metrics_path = "/metrics",
      .metrics_port = "",
      .metrics_note = "on by default (--disable-metrics); prefix lmdeploy:",
      .metrics = {{S::kTtft, "lmdeploy:time_to_first_token_seconds", K::kHistogram, "s", ""},
                  {S::kInterTokenLatency, "lmdeploy:time_per_output_token_seconds", K::kHistogram,
                   "s", ""},
                  {S::kInterTokenLatency, "lmdeploy:iter_token_latency", K::kHistogram, "s", ""},
                  {S::kE2eLatency, "lmdeploy:e2e_request_latency_seconds", K::kHistogram, "s", ""},
                  {S::kQueueTime, "lmdeploy:request_queue_time_seconds", K::kHistogram, "s", ""},
                  {S::kRunning, "lmdeploy:num_requests_running", K::kGauge, "requests", ""},
                  {S::kWaiting, "lmdeploy:num_requests_waiting", K::kGauge, "requests", ""},
                  {S::kKvUsage, "lmdeploy:gpu_cache_usage_perc", K::kGauge, "fraction", ""},
                  {S::kPrefixCacheHits, "lmdeploy:prefix_cache_hit_rate", K::kGauge, "rate", ""},
                  {S::kPromptTokens, "lmdeploy:prompt_tokens", K::kCounter, "tokens", ""},
                  {S::kGenerationTokens, "lmdeploy:generation_tokens", K::kCounter, "tokens", ""}},
      .request = {"ignore_eos", "min_new_tokens", true,
                  "extra chunk with choices [] when stream_options.include_usage; other chunks "
                  "carry usage: null",
                  false},
      .launch = {"lmdeploy serve api_server {model}", "--server-port {port}",
                 "--session-len {context}", "off by default; --enable-prefix-caching",
                 "--tp {parallel}", "", 23333},
      .cold_start = {{"listen", "HINT: Please open http://"}},
      .quirks = {"the minimum length field is min_new_tokens, not min_tokens",
                 "prefix caching is off by default",
                 "temperature 0 becomes top_k 1; n > 1 silently falls back to 1",
                 "excess requests wait (semaphore), never rejected", "no version endpoint"},
      .detect = {{"lmdeploy"}, {}, {"lmdeploy:"}, "", ""},
      .verified = Verified::kFixturesOnly,
      .verified_note = "",
      .reference = "engine-interfaces.md section 8",
  });

  // ---- KServe-fronted (Python ModelServer, Open Inference Protocol + /openai routes): 9 ----
  adapters.push_back(EngineAdapter{
      .name = "kserve",
      .display_name = "KServe",
      .aliases = {"kserve-modelserver"},
      .dialect = "openai under /openai (+ V2 inference protocol /v2/models/{m}/infer)",
      .apis = {A::kChat, A::kCompletions, A::kKserveInfer, A::kEmbeddings, A::kRerank},
      .health = {{"/v2/health/ready", "200 ready; 503 {error} not ready (Triton says 400)", {503}},
                 {"/v2/health/live", "200 live; 503 not live", {503}}},
      // Open Inference Protocol server metadata; KServe's Python server names itself "kserve".
      .version = {{"/v2", VersionRead::kJsonField, "version", {"extensions"}, "kserve"}},
      .metrics_path = "/metrics",
      .metrics_port = "",
      .metrics_note = "the model server's own metrics; engine signals are the backend's (vLLM "
                      "names when the Hugging Face runtime runs vLLM)",
      .metrics = {},
      .request = {"ignore_eos", "min_tokens", false,
                  "as the backend (vLLM for the Hugging Face runtime)", false, dialect::RegexField::kStructuredOutputs},
      .launch = {"python -m huggingfaceserver --model_id={model}", "--http_port={port}",
                 "--max_model_len={context} (vLLM backend)", "as the backend (vLLM: on by default)",
                 "--tensor_parallel_size={parallel} (vLLM backend)", "", 8080},
      .cold_start = {},
      .quirks = {"OpenAI routes live under /openai (KSERVE_OPENAI_ROUTE_PREFIX): use "
                 "--url http://host:port/openai",
                 "not-ready health is 503 (Triton's same routes say 400)",
                 "stops with a 30 s grace period on SIGTERM"},
      .detect = {{}, {}, {}, "", "/openai"},
      .verified = Verified::kFixturesOnly,
      .verified_note = "",
      .reference = "engine-interfaces.md section 9",
  });

  // ---- generic OpenAI-compatible: the fallback ----
  adapters.push_back(EngineAdapter{
      .name = "generic-openai",
      .display_name = "generic OpenAI-compatible",
      .aliases = {"generic", "openai"},
      .dialect = "openai",
      .apis = {A::kChat, A::kCompletions, A::kEmbeddings, A::kRerank},
      .health = {{"/health", "200 ready; anything else or no answer: not ready", {503}}},
      .version = {},
      .metrics_path = "/metrics",
      .metrics_port = "",
      .metrics_note = "read with every engine's names (target/metric_names.h)",
      .metrics = {},
      .request = {"ignore_eos", "min_tokens", true,
                  "asks stream_options.include_usage and accepts usage on any chunk", false, dialect::RegexField::kStructuredOutputs},
      .launch = {"", "", "", "", "", "", 0},
      .cold_start = {},
      .quirks = {"nothing engine-specific is assumed; bakeoff's defaults apply"},
      .detect = {},
      .verified = Verified::kFixturesOnly,
      .verified_note = "",
      .reference = "engine-interfaces.md section 10 (client rules)",
  });
  return adapters;
}


// `key="value"` into a label match; empty when the selector is empty or malformed.
std::vector<MetricLabel> SelectorLabels(std::string_view selector) {
  const std::size_t equals = selector.find('=');
  if (equals == std::string_view::npos || selector.size() < equals + 3) return {};
  std::string_view value = selector.substr(equals + 1);
  if (value.front() != '"' || value.back() != '"') return {};
  value = value.substr(1, value.size() - 2);
  return {MetricLabel{std::string(selector.substr(0, equals)), std::string(value)}};
}

}  // namespace

const char* VerifiedName(Verified verified) {
  return verified == Verified::kLive ? "live" : "fixtures only";
}

std::vector<const SignalMetric*> EngineAdapter::MetricsFor(Signal signal) const {
  std::vector<const SignalMetric*> found;
  for (const SignalMetric& metric : metrics) {
    if (metric.signal == signal) found.push_back(&metric);
  }
  return found;
}

const std::vector<EngineAdapter>& AllAdapters() {
  static const std::vector<EngineAdapter> adapters = BuildAdapters();
  return adapters;
}

const EngineAdapter* FindAdapter(std::string_view name) {
  const std::string wanted = AsciiLower(name);
  for (const EngineAdapter& adapter : AllAdapters()) {
    if (AsciiLower(adapter.name) == wanted || AsciiLower(adapter.display_name) == wanted) return &adapter;
    for (std::string_view alias : adapter.aliases) {
      if (AsciiLower(alias) == wanted) return &adapter;
    }
  }
  return nullptr;
}

const EngineAdapter& GenericOpenAiAdapter() { return AllAdapters().back(); }

std::string AdapterNames() {
  std::string names;
  for (const EngineAdapter& adapter : AllAdapters()) {
    if (!names.empty()) names += ", ";
    names += adapter.name;
  }
  return names;
}

std::optional<std::string> ReadVersion(const VersionSource& source, std::string_view body) {
  if (source.read == VersionRead::kHeader) {
    if (body.empty()) return std::nullopt;
    return std::string(body);
  }
  const nlohmann::json j = ParsePeerJson(body);
  if (!j.is_object()) return std::nullopt;
  for (std::string_view field : source.also_has) {
    if (!j.contains(std::string(field))) return std::nullopt;
  }
  if (!source.name_contains.empty()) {
    auto name = j.find("name");
    if (name == j.end() || !name->is_string() ||
        AsciiLower(name->get<std::string>()).find(AsciiLower(source.name_contains)) == std::string::npos) {
      return std::nullopt;
    }
  }
  auto version = j.find(std::string(source.field));
  if (version == j.end() || !version->is_string() || version->get<std::string>().empty()) {
    return std::nullopt;
  }
  return version->get<std::string>();
}

std::optional<double> SignalValue(const MetricsPage& page, const SignalMetric& metric) {
  const std::vector<MetricLabel> match = SelectorLabels(metric.selector);
  if (metric.kind == SignalKind::kHistogram) {
    const auto histogram = page.HistogramOf(metric.family, match);
    return histogram ? std::optional<double>(histogram->count) : std::nullopt;
  }
  if (auto total = page.Sum(std::string(metric.family) + "_total", match)) return total;
  return page.Sum(metric.family, match);
}

std::optional<MetricsPage::Histogram> SignalHistogram(const MetricsPage& page, const SignalMetric& metric) {
  if (metric.kind != SignalKind::kHistogram) return std::nullopt;
  return page.HistogramOf(metric.family, SelectorLabels(metric.selector));
}

const SignalMetric* FindAdapterSignal(const EngineAdapter& adapter, const MetricsPage& page,
                                      Signal signal) {
  for (const SignalMetric* metric : adapter.MetricsFor(signal)) {
    if (SignalValue(page, *metric)) return metric;
  }
  return nullptr;
}

}  // namespace bakeoff::target
