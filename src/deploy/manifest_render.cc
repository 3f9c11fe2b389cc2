// deploy/manifest_render.cc: the deployment baseline written from measurements (manifest_render.h).
#include "deploy/manifest_render.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "target/adapters.h"

namespace bakeoff::deploy {
namespace {

// Margins over what was measured, and the defaults when nothing was.
constexpr int kStartupPeriodS = 10;
constexpr double kColdStartFactor = 1.5;
constexpr double kColdStartSlackS = 60;
constexpr int kDefaultStartupAllowedS = 600;
constexpr int kPreStopDelayS = 10;  // endpoint removal reaches every proxy before SIGTERM
constexpr double kDrainFactor = 1.5;
constexpr double kDrainSlackS = 5;
constexpr int kDefaultGraceS = 120;

// A YAML scalar that is always read as the string it is (a JSON string is a YAML double-quoted one).
std::string Quoted(std::string_view text) { return nlohmann::json(std::string(text)).dump(); }

// A template's flag words, up to the first word of prose ("(split across --parallel slots)").
std::vector<std::string> FlagWords(std::string_view text, const std::vector<std::pair<std::string, std::string>>& fill) {
  std::string filled(text);
  for (const auto& [key, value] : fill) {
    for (size_t at = filled.find(key); at != std::string::npos; at = filled.find(key, at + value.size())) {
      filled.replace(at, key.size(), value);
    }
  }
  std::vector<std::string> words;
  std::istringstream in(filled);
  for (std::string word; in >> word;) {
    if (word.front() == '(') break;
    words.push_back(word == "127.0.0.1" ? "0.0.0.0" : word);  // a pod listens on its own address
  }
  return words;
}

const target::HealthRoute* LivenessRoute(const target::EngineAdapter& adapter) {
  for (const target::HealthRoute& route : adapter.health) {
    if (!route.generates) return &route;
  }
  return nullptr;
}

std::string NotReadyCodes(const target::HealthRoute& route) {
  std::string codes;
  for (int code : route.not_ready) codes += (codes.empty() ? "" : ", ") + std::to_string(code);
  return codes.empty() ? "a non-2xx status" : codes;
}

// The pieces both variants share: one container and the pod-level numbers.
class Renderer {
 public:
  Renderer(const DeploymentInputs& in, const target::EngineAdapter& adapter)
      : in_(in), adapter_(adapter), name_(DnsLabel(in.name)), port_(adapter.launch.default_port ? adapter.launch.default_port : 8000) {}

  RenderedManifests Render() {
    std::string yaml = fmt::format(
        "# The deployment baseline for candidate {} ({} {}), written by `bakeoff k8s render` from the study\n"
        "# bundle {}. Every number says which measurement (or default) it comes from; `bakeoff k8s lint`\n"
        "# checks it against the same checklist.\n",
        in_.name, adapter_.display_name, in_.image, in_.source);
    if (in_.kserve) {
      yaml += ServingRuntime() + "---\n" + InferenceService();
    } else {
      yaml += Deployment() + "---\n" + Service() + "---\n" + DisruptionBudget();
    }
    return RenderedManifests{std::move(yaml), std::move(defaults_)};
  }

 private:
  std::string Metadata(std::string_view indent, bool with_labels) const {
    std::string out = fmt::format("{}name: {}\n", indent, name_);
    if (!in_.namespace_name.empty()) out += fmt::format("{}namespace: {}\n", indent, DnsLabel(in_.namespace_name));
    if (with_labels) out += fmt::format("{}labels: {{app.kubernetes.io/name: {}, app.kubernetes.io/managed-by: bakeoff}}\n", indent, name_);
    return out;
  }

  std::string Image() {
    if (in_.image_digest.empty()) {
      defaults_.push_back("image: the catalog entry has no digest, so the image is pinned by tag only");
      return fmt::format("image: {}  # NOT PINNED: the catalog entry has no image_digest; add it (image_not_pinned)", Quoted(in_.image));
    }
    std::string image = in_.image.substr(0, in_.image.find('@'));
    return fmt::format("image: {}  # the catalog's image, pinned by its digest", Quoted(image + "@" + in_.image_digest));
  }

  std::vector<std::string> Args() const {
    std::vector<std::pair<std::string, std::string>> fill = {
        {"{model}", in_.model}, {"{port}", std::to_string(port_)}, {"{context}", std::to_string(in_.max_context)},
        {"{parallel}", std::to_string(in_.gpus)}};
    std::vector<std::string> args = FlagWords(adapter_.launch.command, fill);
    // A template is a flag only when it starts with one; others are prose ("in the backend's model
    // config") saying where the setting lives instead.
    auto add_flags = [&](std::string_view part) {
      std::vector<std::string> words = FlagWords(part, fill);
      if (words.empty() || words.front().front() != '-') return;
      for (std::string& word : words) args.push_back(std::move(word));
    };
    add_flags(adapter_.launch.port);
    // SGLang and trtllm-serve listen on loopback unless told: the kubelet's probes and the Service
    // reach a pod on its own address.
    if (adapter_.name == "sglang" || adapter_.name == "trtllm") add_flags("--host 0.0.0.0");
    add_flags(adapter_.launch.metrics);
    if (in_.max_context > 0) add_flags(adapter_.launch.context_limit);
    if (in_.gpus > 1) add_flags(adapter_.launch.parallelism);
    // The engines whose serve command takes the Hugging Face revision as --revision.
    if (!in_.model_revision.empty() && (adapter_.name == "vllm" || adapter_.name == "sglang" || adapter_.name == "tgi")) {
      args.push_back("--revision");
      args.push_back(in_.model_revision);
    }
    for (const std::string& setting : in_.settings) args.push_back(setting);
    return args;
  }

  std::string Container(std::string_view indent, std::string_view container_name) {
    std::string out = fmt::format("{}- name: {}\n", indent, container_name);
    const std::string in = std::string(indent) + "  ";
    out += in + Image() + "\n";
    std::vector<std::string> args = Args();
    // Ollama pulls its model after it starts, and Triton serves a model repository prepared for it:
    // neither command can name the study's model, so their images' entrypoints stay.
    const bool plain_command = !args.empty() && adapter_.name != "ollama" && adapter_.name != "triton";
    if (plain_command) {
      out += fmt::format("{}# {}'s serve command with the study's model, context and settings\n", in, adapter_.display_name);
      out += in + "command: [";
      for (size_t i = 0; i < args.size(); ++i) out += (i ? ", " : "") + Quoted(args[i]);
      out += "]\n";
    } else {
      out += fmt::format("{}# {} is started by its image's entrypoint ({}); give it the model there\n", in,
                         adapter_.display_name, adapter_.launch.command);
      defaults_.push_back(fmt::format("command: {} keeps its image's entrypoint; give it the model ({})",
                                      adapter_.display_name, adapter_.launch.command));
    }
    if (in_.model_revision.empty()) {
      defaults_.push_back("model revision: the study does not pin one, so a re-download may serve other weights");
      out += in + "# NOT PINNED: the study names no model revision (model_revision_not_pinned)\n";
    }
    out += fmt::format("{}ports: [{{name: http, containerPort: {}}}]\n", in, port_);

    const target::HealthRoute& ready = adapter_.ReadinessRoute();
    out += fmt::format("{}# {}: {}\n", in, ready.path, ready.meaning);
    out += fmt::format("{}readinessProbe:  # not ready while it answers {}\n", in, NotReadyCodes(ready));
    out += fmt::format("{}  httpGet: {{path: {}, port: http}}\n", in, ready.path);
    out += fmt::format("{}  periodSeconds: {}{}\n", in, ready.generates ? 15 : 5,
                       ready.generates ? "  # this route runs a generation: polled gently" : "");
    // A generation waits its turn in a busy engine: the default 1 s timeout would take the pod out
    // of the Service exactly when it is busiest.
    const std::string timeout = fmt::format("{}  timeoutSeconds: {}\n", in, ready.generates ? 10 : 2);
    out += timeout + in + "  failureThreshold: 3\n";
    if (ready.path == "/") {
      defaults_.push_back(fmt::format("readiness: {}'s only health route is `/`: {}", adapter_.display_name, ready.meaning));
    }

    int allowed = kDefaultStartupAllowedS;
    std::string why = fmt::format("cold start not measured: a default of {} s", kDefaultStartupAllowedS);
    if (in_.cold_start_s) {
      allowed = static_cast<int>(std::ceil(*in_.cold_start_s * kColdStartFactor + kColdStartSlackS));
      why = fmt::format("covers {} s: the measured cold start {:.1f} s ({}/{}) x {} + {:.0f} s", allowed,
                        *in_.cold_start_s, in_.source, in_.probes_file, kColdStartFactor, kColdStartSlackS);
    } else {
      defaults_.push_back(fmt::format("cold start: not measured, the startupProbe allows a default {} s", allowed));
    }
    const int failures = (allowed + kStartupPeriodS - 1) / kStartupPeriodS;
    out += fmt::format("{}startupProbe:  # {}\n", in, why);
    out += fmt::format("{}  httpGet: {{path: {}, port: http}}\n", in, ready.path);
    out += fmt::format("{}  periodSeconds: {}\n{}{}  failureThreshold: {}  # x {} s = {} s\n", in, kStartupPeriodS,
                       timeout, in, failures, kStartupPeriodS, failures * kStartupPeriodS);

    if (const target::HealthRoute* live = LivenessRoute(adapter_)) {
      out += fmt::format("{}livenessProbe:  # {} generates nothing: a busy engine still answers it\n", in, live->path);
      out += fmt::format("{}  httpGet: {{path: {}, port: http}}\n", in, live->path);
    } else {
      out += fmt::format("{}livenessProbe:  # every {} health route generates, so liveness only asks whether the port is open\n",
                         in, adapter_.display_name);
      out += in + "  tcpSocket: {port: http}\n";
    }
    out += in + "  periodSeconds: 10\n" + in + "  timeoutSeconds: 5\n" + in + "  failureThreshold: 6  # a minute of silence\n";
    out += fmt::format("{}lifecycle:  # {} s for the endpoint's removal to reach every proxy before SIGTERM\n", in, kPreStopDelayS);
    out += fmt::format("{}  preStop: {{exec: {{command: [sleep, \"{}\"]}}}}\n", in, kPreStopDelayS);

    out += in + "resources:\n";
    if (in_.gpus > 0 && in_.accelerator != "cpu") {
      const std::string gpu = in_.accelerator == "amd" ? "amd.com/gpu" : "nvidia.com/gpu";
      out += fmt::format("{}  # {} {} per pod, as the study ran it; a GPU request needs the same limit\n", in, in_.gpus, gpu);
      out += fmt::format("{}  requests: {{{}: \"{}\"}}\n{}  limits: {{{}: \"{}\"}}\n", in, gpu, in_.gpus, in, gpu, in_.gpus);
    } else {
      out += in + "  # the study ran on CPU: set cpu and memory from the engine's measured use (summary.json resources)\n";
      out += in + "  requests: {}\n";
    }
    out += in + "securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, seccompProfile: {type: RuntimeDefault}}\n";
    out += in + "volumeMounts:\n" + in + "  - {name: dshm, mountPath: /dev/shm}  # workers share memory here; the default 64 MiB crashes them\n";
    return out;
  }

  std::string GraceLine(std::string_view indent) {
    int grace = kDefaultGraceS;
    std::string why = fmt::format("drain not measured: a default of {} s", kDefaultGraceS);
    if (in_.drain_s) {
      grace = static_cast<int>(std::ceil(*in_.drain_s * kDrainFactor + kDrainSlackS + kPreStopDelayS));
      why = fmt::format("the measured drain {:.1f} s ({}/{}) x {} + {:.0f} s, plus the {} s preStop delay",
                        *in_.drain_s, in_.source, in_.probes_file, kDrainFactor, kDrainSlackS, kPreStopDelayS);
    } else {
      defaults_.push_back(fmt::format("drain: not measured, terminationGracePeriodSeconds is a default {} s", grace));
    }
    return fmt::format("{}terminationGracePeriodSeconds: {}  # {}\n", indent, grace, why);
  }

  std::string Replicas(std::string_view indent, std::string_view key) {
    int replicas = 2;
    std::string why = "two, so a disruption or a rollout leaves one serving";
    if (in_.capacity_per_s && *in_.capacity_per_s > 0 && in_.workload_rate_per_s > 0) {
      int needed = static_cast<int>(std::ceil(in_.workload_rate_per_s / *in_.capacity_per_s));
      replicas = std::max(2, needed + 1);
      why = fmt::format("the workload's {:.3g} req/s over the measured capacity of {:.3g} req/s per replica at the SLO "
                        "({}/{}) needs {}, plus one for disruptions and rollouts; `bakeoff plan` sizes a fleet for peaks",
                        in_.workload_rate_per_s, *in_.capacity_per_s, in_.source, in_.capacity_file, needed);
    } else {
      defaults_.push_back("replicas: no capacity measured, so 2");
    }
    return fmt::format("{}{}: {}  # {}\n", indent, key, replicas, why);
  }

  std::string Volumes(std::string_view indent) const {
    return fmt::format("{}volumes:\n{}  - name: dshm\n{}    emptyDir: {{medium: Memory, sizeLimit: 16Gi}}  # counts against the pod's memory\n",
                       indent, indent, indent);
  }

  std::string Deployment() {
    std::string out = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n" + Metadata("  ", true) + "spec:\n";
    out += Replicas("  ", "replicas");
    out += "  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}  # never below capacity\n";
    out += fmt::format("  selector:\n    matchLabels: {{app.kubernetes.io/name: {}}}\n", name_);
    out += "  template:\n    metadata:\n" + fmt::format("      labels: {{app.kubernetes.io/name: {}}}\n", name_);
    if (!adapter_.metrics_path.empty()) {
      out += fmt::format("      annotations: {{prometheus.io/scrape: \"true\", prometheus.io/path: {}, prometheus.io/port: \"{}\"}}\n",
                         adapter_.metrics_path, adapter_.metrics_port.empty() ? std::to_string(port_) : std::string(adapter_.metrics_port));
    }
    out += "    spec:\n" + GraceLine("      ") + "      containers:\n" + Container("        ", "server") + Volumes("      ");
    return out;
  }

  std::string Service() const {
    return "apiVersion: v1\nkind: Service\nmetadata:\n" + Metadata("  ", true) +
           fmt::format("spec:\n  selector: {{app.kubernetes.io/name: {}}}\n  ports: [{{name: http, port: 80, targetPort: http}}]\n", name_);
  }

  std::string DisruptionBudget() const {
    return "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n" + Metadata("  ", true) +
           fmt::format("spec:\n  maxUnavailable: 1  # a node drain takes one replica at a time\n"
                       "  selector:\n    matchLabels: {{app.kubernetes.io/name: {}}}\n", name_);
  }

  std::string ServingRuntime() {
    std::string out = "apiVersion: serving.kserve.io/v1alpha1\nkind: ServingRuntime\nmetadata:\n" + Metadata("  ", true);
    out += fmt::format("spec:\n  supportedModelFormats: [{{name: {}, autoSelect: true}}]\n", DnsLabel(adapter_.name));
    out += "  containers:\n" + Container("    ", "kserve-container") + Volumes("  ");
    return out;
  }

  std::string InferenceService() {
    std::string out = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n" + Metadata("  ", true);
    // Knative (KServe's default mode) refuses a port named `http` and container lifecycle hooks.
    out += "  annotations: {serving.kserve.io/deploymentMode: RawDeployment}  # a plain Deployment: probes and preStop as written\n";
    out += "spec:\n  predictor:\n" + Replicas("    ", "minReplicas") + GraceLine("    ");
    out += fmt::format("    model:\n      modelFormat: {{name: {}}}\n      runtime: {}\n", DnsLabel(adapter_.name), name_);
    return out;
  }

  const DeploymentInputs& in_;
  const target::EngineAdapter& adapter_;
  std::string name_;
  int port_;
  std::vector<std::string> defaults_;
};

}  // namespace

std::string DnsLabel(std::string_view text) {
  std::string out;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) out += static_cast<char>(std::tolower(u));
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  // A Service's name must start with a letter (DNS-1035), and any name is at most 63 characters.
  if (!out.empty() && !std::isalpha(static_cast<unsigned char>(out.front()))) out = "c-" + out;
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "candidate" : out;
}

Result<RenderedManifests> RenderDeployment(const DeploymentInputs& inputs) {
  if (inputs.engine == "emulated" || inputs.image == "builtin") {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("candidate {} is bakeoff's emulated engine: there is nothing to deploy", inputs.name));
  }
  const target::EngineAdapter* adapter = target::FindAdapter(inputs.engine);
  if (!adapter || adapter->name == target::GenericOpenAiAdapter().name) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("candidate {}: engine '{}' has no adapter with a serve command and health routes ({})",
                                 inputs.name, inputs.engine, target::AdapterNames()));
  }
  if (inputs.image.empty()) {
    return MakeError(ErrorCode::kInvalidInput, fmt::format("candidate {}: its catalog entry names no image", inputs.name));
  }
  return Renderer(inputs, *adapter).Render();
}

}  // namespace bakeoff::deploy
