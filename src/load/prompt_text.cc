#include "load/prompt_text.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/rng.h"

namespace bakeoff::load {
namespace {

// Written for bakeoff; any ordinary prose works. Varied vocabulary keeps real tokenizers near
// their usual tokens-per-word ratio.
constexpr std::string_view kCorpus = R"(
Before dawn the baker lit the oven and waited for the bricks to warm. Flour, water, salt and a
little starter from yesterday went into the wide wooden trough, and she folded the dough with
slow, patient hands while the street outside was still dark. Every morning followed the same
order, yet no two loaves ever came out quite alike: the weather, the age of the flour and the
mood of the fire all left their mark on the crust.
Travellers who stopped at the shop often asked how she knew when the bread was ready. She would
tap the bottom of a loaf and listen for a hollow sound, then hold it near her ear as if it might
tell a secret. Her grandfather had taught her that trick, together with a dozen others that no
recipe book ever mentioned, such as how a handful of steam in the first minutes gives the loaf
room to rise before the crust sets.
The village around the bakery changed slowly. A railway line arrived and left again, a school
was built on the hill, and the old mill by the river became a museum where children learned how
grain was once ground between two heavy stones. Through all of it the bakery kept its hours,
opening at six and closing when the last basket was empty, which on market days could be well
before noon.
In winter the shop became a meeting place. Farmers came in stamping snow from their boots,
students counted coins for a warm roll, and the postman always took two pastries, one for
himself and one, he said, for the long road up to the farms near the forest. Conversations about
prices, harvests, weddings and the football match on Sunday filled the small room until the
windows fogged over.
Measuring carefully mattered more than any secret ingredient. A scale that weighed to the gram,
a thermometer for the water and a notebook of every batch let her find the cause when something
went wrong. If a loaf spread flat she checked the proofing time; if the crumb was tight she
looked at the hydration; if the crust burned she questioned the oven and not the dough. Numbers,
she liked to say, do not argue, but they must be read honestly and in context.
Competition arrived one spring when a large store on the main road began selling cheap bread
baked far away and delivered by truck each night. For a few weeks the queue at the bakery grew
shorter. Then people started coming back, some for the taste, some for the conversation, and
some because the cheap bread went stale by evening while hers still tasted good the next day.
Years later, when her daughter took over, the trough was replaced by a mixing machine and the
oven by one that could be programmed to the minute. Yet the daughter kept the notebook, still
tapped the loaves and listened, and still lit the oven before dawn, because some habits are
worth keeping even when the tools around them change completely.
)";

constexpr std::uint32_t kIndependentLeadWords = 12;

}  // namespace

std::uint32_t WordsForTokens(std::uint32_t tokens, double words_per_token) {
  BAKEOFF_CHECK(words_per_token > 0);
  return static_cast<std::uint32_t>(
      std::max(1.0, std::round(static_cast<double>(tokens) * words_per_token)));
}

std::uint32_t PromptWords(std::uint32_t tokens, const PromptSizing& sizing) {
  const double content = std::max(1.0, static_cast<double>(tokens) - sizing.overhead_tokens);
  return WordsForTokens(static_cast<std::uint32_t>(std::round(content)), sizing.words_per_token);
}

PromptText::PromptText() {
  std::size_t i = 0;
  while (i < kCorpus.size()) {
    while (i < kCorpus.size() && (kCorpus[i] == ' ' || kCorpus[i] == '\n')) ++i;
    const std::size_t start = i;
    while (i < kCorpus.size() && kCorpus[i] != ' ' && kCorpus[i] != '\n') ++i;
    if (i > start) words_.push_back(kCorpus.substr(start, i - start));
  }
}

std::string PromptText::Build(std::uint32_t words, std::uint64_t seed) const {
  BAKEOFF_CHECK(words > 0);
  Rng rng(seed);
  std::size_t at = rng.Below(words_.size());
  std::string text;
  text.reserve(static_cast<std::size_t>(words) * 7);
  for (std::uint32_t k = 0; k < words; ++k) {
    if (k > 0) text.push_back(' ');
    // The first words are drawn independently, so two prompts share a prefix of a block or more
    // only by an astronomically unlikely chance; the rest reads as running text.
    if (k < kIndependentLeadWords) at = rng.Below(words_.size());
    text.append(words_[at]);
    if (++at == words_.size()) at = 0;
  }
  return text;
}

}  // namespace bakeoff::load
