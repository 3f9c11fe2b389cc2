// deploy/manifest_lint.cc: the deployment checklist on manifests (contract in manifest_lint.h).
#include "deploy/manifest_lint.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/yaml_doc.h"
#include "target/adapters.h"

namespace bakeoff::deploy {
namespace {

constexpr int kMaxDocuments = 100'000;  // a rendered chart can hold many; the parse stays bounded

// n[key] when n is a mapping that has it, else an undefined node (false, empty to iterate, and
// safe to look into again: yaml-cpp 0.7 throws when a missing key's node is indexed again, and
// manifests leave most keys out).
YAML::Node At(const YAML::Node& n, std::string_view key) {
  if (!n || !n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node v = n[std::string(key)];
  return v ? v : YAML::Node(YAML::NodeType::Undefined);
}
std::string Str(const YAML::Node& n) { return n && n.IsScalar() ? n.Scalar() : std::string(); }
int Line(const YAML::Node& n) { return n ? yaml::LineOf(n.Mark()) : 0; }
std::optional<double> Number(const YAML::Node& n) {
  if (!n || !n.IsScalar()) return std::nullopt;
  try {
    return std::stod(n.Scalar());
  } catch (...) {
    return std::nullopt;
  }
}
bool Contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// Routes that run a generation: a liveness probe on one fails whenever the engine is busy.
constexpr std::string_view kGenerationRoutes[] = {
    "/v1/completions", "/v1/chat/completions", "/generate", "/generate_stream", "/api/generate",
    "/api/chat",       "/completion",          "/completions", "/v1/responses", "/health_generate"};

// The engine a container runs, from its image or command line; null when nothing names one.
const target::EngineAdapter* EngineOf(const std::string& image, const std::string& command_line) {
  struct Hint { std::string_view text, engine; };
  constexpr Hint kHints[] = {{"sglang", "sglang"},        {"vllm", "vllm"},
                             {"tritonserver", "triton"},  {"text-generation-inference", "tgi"},
                             {"text-generation-launcher", "tgi"}, {"tensorrt-llm", "trtllm"},
                             {"trtllm", "trtllm"},        {"llama.cpp", "llamacpp"},
                             {"llama-server", "llamacpp"}, {"ollama", "ollama"},
                             {"lmdeploy", "lmdeploy"}};
  for (const Hint& h : kHints) {
    if (Contains(image, h.text) || Contains(command_line, h.text)) return target::FindAdapter(h.engine);
  }
  return nullptr;
}

struct Workload {
  std::string object;     // "Deployment/vllm"
  std::string name_space;  // "" = default
  int line = 0;
  std::map<std::string, std::string> labels;  // the pod template's
  bool wants_pdb = true;
};

class Linter {
 public:
  Linter(const MeasuredLifecycle& measured, LintReport& report) : measured_(measured), report_(report) {}

  void Document(const std::string& file, const YAML::Node& doc) {
    if (!doc || !doc.IsMap()) return;
    const std::string kind = Str(At(doc, "kind"));
    if (kind == "List") {
      for (const YAML::Node& item : At(doc, "items")) Document(file, item);
      return;
    }
    const std::string name = Str(At(At(doc, "metadata"), "name"));
    const std::string object = fmt::format("{}/{}", kind.empty() ? "?" : kind, name.empty() ? "?" : name);
    const std::string name_space = Str(At(At(doc, "metadata"), "namespace"));
    file_ = file;
    object_ = object;
    const YAML::Node spec = At(doc, "spec");
    if (kind == "Deployment" || kind == "StatefulSet") {
      Pod(At(At(spec, "template"), "spec"));
      workloads_.push_back({object, name_space, Line(doc), Labels(At(At(At(spec, "template"), "metadata"), "labels")), true});
    } else if (kind == "LeaderWorkerSet") {
      const YAML::Node lws = At(spec, "leaderWorkerTemplate");
      if (At(lws, "leaderTemplate")) Pod(At(At(lws, "leaderTemplate"), "spec"));
      Pod(At(At(lws, "workerTemplate"), "spec"));
      std::map<std::string, std::string> labels = Labels(At(At(At(lws, "workerTemplate"), "metadata"), "labels"));
      labels["leaderworkerset.sigs.k8s.io/name"] = name;  // LWS labels every pod with its name
      workloads_.push_back({object, name_space, Line(doc), labels, true});
    } else if (kind == "InferenceService") {
      // KServe makes the pods (Knative or raw Deployments); their disruption budget is its business.
      // A model spec is merged into its runtime's container, so it is checked once every runtime
      // of the files is known (Finish).
      const YAML::Node predictor = At(spec, "predictor");
      if (At(predictor, "containers")) {
        Pod(predictor);
      } else if (At(predictor, "model")) {
        models_.push_back({file, object, predictor});
      }
      ++report_.objects_checked;
    } else if (kind == "ServingRuntime" || kind == "ClusterServingRuntime") {
      // A runtime's pod has no grace period of its own: the InferenceService's predictor sets it.
      Pod(spec, /*check_grace=*/false);
      const YAML::Node containers = At(spec, "containers");
      // emplace, never assign: assigning a yaml-cpp Node rewrites the node it already refers to.
      if (containers && containers.IsSequence() && containers.size() > 0) runtimes_.emplace(name, containers[0]);
      ++report_.objects_checked;
    } else if (kind == "PodDisruptionBudget") {
      budgets_.push_back({name_space, Labels(At(At(spec, "selector"), "matchLabels"))});
    } else {
      report_.skipped.push_back(fmt::format("{}:{}: {}: skipped (not a workload this lint checks)", file, Line(doc), object));
    }
  }

  void Finish() {
    for (const KServeModel& m : models_) {
      file_ = m.file;
      object_ = m.object;
      const YAML::Node model = At(m.predictor, "model");
      auto runtime = runtimes_.find(Str(At(model, "runtime")));
      fallback_ = runtime == runtimes_.end() ? nullptr : &runtime->second;
      ModelServer(model, m.predictor, /*has_image=*/false);
      fallback_ = nullptr;
      Grace(m.predictor);
    }
    for (const Workload& w : workloads_) {
      ++report_.objects_checked;
      const bool covered = std::any_of(budgets_.begin(), budgets_.end(), [&](const Budget& b) {
        return b.name_space == w.name_space && !b.match.empty() &&
               std::all_of(b.match.begin(), b.match.end(), [&](const auto& kv) {
                 auto it = w.labels.find(kv.first);
                 return it != w.labels.end() && it->second == kv.second;
               });
      });
      if (!covered) {
        Add(w.line, w.object, "no_pdb",
            "no PodDisruptionBudget in these files selects its pods: a node drain may take every replica at once");
      }
    }
  }

 private:
  struct Budget {
    std::string name_space;
    std::map<std::string, std::string> match;
  };
  // An InferenceService's predictor.model, checked in Finish with the runtime it names.
  struct KServeModel {
    std::string file, object;
    YAML::Node predictor;
  };

  // A container's probe; a KServe model spec without one has its runtime container's.
  YAML::Node ProbeOf(const YAML::Node& c, const char* key) const {
    YAML::Node probe = At(c, key);
    return probe || fallback_ == nullptr ? probe : At(*fallback_, key);
  }

  static std::map<std::string, std::string> Labels(const YAML::Node& n) {
    std::map<std::string, std::string> out;
    if (n && n.IsMap()) {
      for (const auto& kv : n) out[Str(kv.first)] = Str(kv.second);
    }
    return out;
  }

  void Add(int line, const std::string& object, std::string code, std::string message) {
    report_.findings.push_back({file_, line, object, std::move(code), std::move(message)});
  }
  void Add(const YAML::Node& at, std::string code, std::string message) {
    Add(Line(at), object_, std::move(code), std::move(message));
  }

  void Pod(const YAML::Node& pod, bool check_grace = true) {
    if (!pod || !pod.IsMap()) return;
    const YAML::Node containers = At(pod, "containers");
    if (!containers || !containers.IsSequence()) return;
    for (const YAML::Node& c : containers) Image(c);
    for (const YAML::Node& c : At(pod, "initContainers")) Image(c);
    // The checks of a model server apply to the containers that run one (a sidecar has other
    // needs); a pod with a single container is taken to be one.
    bool any = false;
    for (const YAML::Node& c : containers) {
      if (containers.size() == 1 || IsModelServer(c)) {
        ModelServer(c, pod, /*has_image=*/true);
        any = true;
      }
    }
    if (!any && containers.size() > 0) ModelServer(containers[0], pod, true);
    if (check_grace) Grace(pod);
  }

  static std::string CommandLine(const YAML::Node& c) {
    std::string line;
    for (const char* key : {"command", "args"}) {
      for (const YAML::Node& a : At(c, key)) line += Str(a) + " ";
    }
    return line;
  }

  static bool RequestsGpu(const YAML::Node& c) {
    for (const char* side : {"requests", "limits"}) {
      const YAML::Node r = At(At(c, "resources"), side);
      if (!r || !r.IsMap()) continue;
      for (const auto& kv : r) {
        if (Contains(Str(kv.first), "gpu")) return true;
      }
    }
    return false;
  }

  static bool IsModelServer(const YAML::Node& c) {
    return EngineOf(Str(At(c, "image")), CommandLine(c)) != nullptr || RequestsGpu(c);
  }

  void Image(const YAML::Node& c) {
    const YAML::Node node = At(c, "image");
    const std::string image = Str(node);
    if (image.empty()) return;
    const std::string container = Str(At(c, "name"));
    const std::size_t at = image.find("@sha256:");
    if (at != std::string::npos) return;  // pinned whatever its tag says
    const std::size_t slash = image.rfind('/');
    const std::size_t colon = image.rfind(':');
    const bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
    const std::string tag = tagged ? image.substr(colon + 1) : "";
    if (tag == "latest") {
      Add(node, "image_latest", fmt::format("container {}: image {} is `latest`: every pull may run another engine "
                                            "version; pin it by digest (IMAGE@sha256:...)", container, image));
    } else if (!tagged) {
      Add(node, "image_untagged", fmt::format("container {}: image {} has no tag (so `latest`) and no digest; pin it "
                                              "by digest (IMAGE@sha256:...)", container, image));
    } else {
      Add(node, "image_not_pinned", fmt::format("container {}: image {} is pinned by tag only; a tag can be moved, a "
                                                "digest cannot (IMAGE:{}@sha256:...)", container, image, tag));
    }
  }

  // A container (or KServe model spec) that serves a model.
  void ModelServer(const YAML::Node& c, const YAML::Node& pod, bool has_image) {
    const std::string container = Str(At(c, "name")).empty() ? "model" : Str(At(c, "name"));
    // A KServe model spec runs in its runtime's container: that image and command count too.
    const std::string command_line = CommandLine(c) + (fallback_ != nullptr ? CommandLine(*fallback_) : "");
    const std::string image = At(c, "image") || fallback_ == nullptr ? Str(At(c, "image")) : Str(At(*fallback_, "image"));
    const target::EngineAdapter* engine = EngineOf(image, command_line);
    const YAML::Node where = At(c, "name") ? At(c, "name") : c;
    Readiness(c, where, container, engine);
    Startup(c, where, container);
    Liveness(c, container, engine);
    if (has_image) SharedMemory(c, pod, where, container);
    Gpu(c, container);
    Revision(c, where, container, command_line);
  }

  void Readiness(const YAML::Node& c, const YAML::Node& where, const std::string& container,
                 const target::EngineAdapter* engine) {
    const YAML::Node probe = ProbeOf(c, "readinessProbe");
    const std::string ready = engine != nullptr ? std::string(engine->ReadinessRoute().path) : "/health";
    if (!probe) {
      Add(where, "no_readiness", fmt::format("container {}: no readinessProbe: traffic reaches it before the model "
                                             "is loaded (GET {} means ready{})", container, ready,
                                             engine != nullptr ? " for " + std::string(engine->display_name) : ""));
      return;
    }
    if (At(probe, "tcpSocket")) {
      Add(probe, "readiness_port_only", fmt::format("container {}: the readinessProbe only checks that the port is "
                                                    "open, which it is while the weights load; GET {} instead",
                                                    container, ready));
    } else if (ready != "/" && At(probe, "httpGet") &&
               (Str(At(At(probe, "httpGet"), "path")).empty() || Str(At(At(probe, "httpGet"), "path")) == "/")) {
      Add(probe, "readiness_port_only", fmt::format("container {}: the readinessProbe GETs `/`, which answers before "
                                                    "the model can serve; GET {} instead", container, ready));
    }
  }

  void Startup(const YAML::Node& c, const YAML::Node& where, const std::string& container) {
    const YAML::Node probe = ProbeOf(c, "startupProbe");
    const std::string measured = measured_.cold_start_s
                                     ? fmt::format(" (the measured cold start is {:.1f} s, {})", *measured_.cold_start_s, measured_.source)
                                     : "";
    if (!probe) {
      Add(where, "no_startup_probe", fmt::format("container {}: no startupProbe: while the weights load, the liveness "
                                                 "probe fails and restarts it{}", container, measured));
      return;
    }
    if (!measured_.cold_start_s) return;
    const double allowed = Number(At(probe, "initialDelaySeconds")).value_or(0) +
                           Number(At(probe, "failureThreshold")).value_or(3) * Number(At(probe, "periodSeconds")).value_or(10);
    if (allowed < *measured_.cold_start_s) {
      Add(probe, "startup_shorter_than_cold_start",
          fmt::format("container {}: the startupProbe allows {:.0f} s (initialDelaySeconds + failureThreshold x "
                      "periodSeconds), shorter than the measured cold start of {:.0f} s ({}): it is restarted before "
                      "it ever serves",
                      container, allowed, *measured_.cold_start_s, measured_.source));
    }
  }

  void Liveness(const YAML::Node& c, const std::string& container, const target::EngineAdapter* engine) {
    const YAML::Node probe = ProbeOf(c, "livenessProbe");
    if (!probe) return;
    std::string what;
    if (At(probe, "httpGet")) {
      const std::string path = Str(At(At(probe, "httpGet"), "path"));
      for (std::string_view route : kGenerationRoutes) {
        if (path == route) what = "GET " + path + " runs a generation";
      }
      if (what.empty() && engine != nullptr) {
        for (const target::HealthRoute& h : engine->health) {
          if (h.path == path && h.generates) {
            what = fmt::format("{}'s {} runs a generation ({})", engine->display_name, path, h.meaning);
          }
        }
      }
    } else if (At(probe, "exec")) {
      std::string command;
      for (const YAML::Node& a : At(At(probe, "exec"), "command")) command += Str(a) + " ";
      for (std::string_view route : kGenerationRoutes) {
        if (Contains(command, route)) what = fmt::format("its command calls {}", route);
      }
    }
    if (!what.empty()) {
      Add(probe, "liveness_generates", fmt::format("container {}: the livenessProbe asks for a generation ({}): when "
                                                   "the engine is busy it times out and the pod is restarted under "
                                                   "load; liveness should only ask whether the process is alive",
                                                   container, what));
    }
  }

  void SharedMemory(const YAML::Node& c, const YAML::Node& pod, const YAML::Node& where, const std::string& container) {
    std::string volume;
    for (const YAML::Node& m : At(c, "volumeMounts")) {
      if (Str(At(m, "mountPath")) == "/dev/shm") volume = Str(At(m, "name"));
    }
    bool memory_backed = false;
    for (const YAML::Node& v : At(pod, "volumes")) {
      if (Str(At(v, "name")) == volume && At(v, "emptyDir") && Str(At(At(v, "emptyDir"), "medium")) == "Memory") memory_backed = true;
    }
    if (volume.empty() || !memory_backed) {
      Add(where, "no_dev_shm", fmt::format("container {}: no memory-backed emptyDir mounted at /dev/shm: the "
                                           "container runtime's 64 MiB default crashes tensor-parallel workers and "
                                           "slows data loading (emptyDir: {{medium: Memory, sizeLimit: ...}})",
                                           container));
    }
  }

  void Gpu(const YAML::Node& c, const std::string& container) {
    const YAML::Node requests = At(At(c, "resources"), "requests");
    if (!requests || !requests.IsMap()) return;
    for (const auto& kv : requests) {
      const std::string resource = Str(kv.first);
      if (!Contains(resource, "gpu")) continue;
      const YAML::Node limit = At(At(At(c, "resources"), "limits"), resource);
      if (!limit || Str(limit) != Str(kv.second)) {
        Add(kv.first, "gpu_request_without_limit",
            fmt::format("container {}: requests {} {} without the same limit: extended resources are scheduled by "
                        "their limit (set limits.{} = {})", container, Str(kv.second), resource, resource,
                        Str(kv.second)));
      }
    }
  }

  void Revision(const YAML::Node& c, const YAML::Node& where, const std::string& container,
                const std::string& command_line) {
    // The model as named: a flag's value, `vllm serve MODEL`, a model-id variable, a storage URI.
    std::string model;
    std::vector<std::string> args;
    for (const char* key : {"command", "args"}) {
      for (const YAML::Node& a : At(c, key)) args.push_back(Str(a));
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      for (std::string_view flag : {"--model", "--model-path", "--model-id", "--model_id"}) {
        if (a == flag && i + 1 < args.size()) model = args[i + 1];
        if (a.rfind(std::string(flag) + "=", 0) == 0) model = a.substr(flag.size() + 1);
      }
      if (a == "serve" && i + 1 < args.size() && args[i + 1].rfind("-", 0) != 0) model = args[i + 1];
    }
    bool pinned = Contains(command_line, "--revision");
    for (const YAML::Node& e : At(c, "env")) {
      const std::string name = Str(At(e, "name"));
      if (name == "MODEL_ID" || name == "HF_MODEL_ID" || name == "MODEL_NAME") model = Str(At(e, "value"));
      if (name == "REVISION" || name == "HF_REVISION" || name == "MODEL_REVISION") pinned = true;
    }
    const std::string uri = Str(At(c, "storageUri"));
    if (uri.rfind("hf://", 0) == 0) model = uri;
    // A local path is pinned by whatever put it there; a hub id or hf:// URI is fetched by name.
    const bool by_name = !model.empty() && model[0] != '/' && model[0] != '.' && Contains(model, "/") &&
                         model.rfind("s3://", 0) != 0 && model.rfind("gs://", 0) != 0 && model.rfind("pvc://", 0) != 0;
    if (by_name && !pinned) {
      Add(where, "model_revision_not_pinned",
          fmt::format("container {}: the model {} is fetched by name without a revision: a new upload serves other "
                      "weights after the next restart (--revision COMMIT)", container, model));
    }
  }

  void Grace(const YAML::Node& pod) {
    if (!measured_.drain_s) return;
    const YAML::Node node = At(pod, "terminationGracePeriodSeconds");
    const double grace = Number(node).value_or(30);
    if (grace < *measured_.drain_s) {
      Add(node ? node : pod, "grace_shorter_than_drain",
          fmt::format("terminationGracePeriodSeconds is {:.0f} s{}, shorter than the measured drain of {:.1f} s ({}): "
                      "streams in flight are cut at every rollout",
                      grace, node ? "" : " (the default)", *measured_.drain_s, measured_.source));
    }
  }

  const MeasuredLifecycle& measured_;
  LintReport& report_;
  std::string file_, object_;
  std::vector<Workload> workloads_;
  std::vector<Budget> budgets_;
  std::vector<KServeModel> models_;
  std::map<std::string, YAML::Node> runtimes_;  // ServingRuntime name -> its first container
  const YAML::Node* fallback_ = nullptr;  // while a KServe model spec is checked: its runtime's container
};

}  // namespace

std::string LintFinding::Text() const {
  return fmt::format("{}:{}: {}: {}: {}", file, line, object, code, message);
}

LintReport LintManifests(const std::vector<LintInput>& inputs, const MeasuredLifecycle& measured) {
  LintReport report;
  Linter linter(measured, report);
  for (const LintInput& input : inputs) {
    // yaml-cpp 0.7 never finishes some malformed inputs: they are refused first.
    if (Status st = yaml::CheckYamlTerminates(input.text, input.file, {}, kMaxDocuments); !st.ok()) {
      report.unreadable.push_back(st.error().message);
      continue;
    }
    try {
      for (const YAML::Node& doc : YAML::LoadAll(input.text)) linter.Document(input.file, doc);
    } catch (const YAML::Exception& e) {
      report.unreadable.push_back(fmt::format("{}:{}: not valid YAML: {}", input.file, yaml::LineOf(e.mark), e.msg));
    }
  }
  linter.Finish();
  std::stable_sort(report.findings.begin(), report.findings.end(), [](const LintFinding& a, const LintFinding& b) {
    return std::tie(a.file, a.line) < std::tie(b.file, b.line);
  });
  return report;
}

}  // namespace bakeoff::deploy
