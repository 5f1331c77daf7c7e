/* tools/tool_turn.h — what a tool turn adds to a sequence: the tokens of the tool
 * results after the model's call, up to the next assistant header, as TRL's
 * GRPOTrainer builds them (_get_tool_suffix_ids): the chat template renders a
 * minimal conversation — a user turn, an assistant turn calling the first
 * tool, then the tool messages with the generation prompt — and the ids after
 * the assistant turn's end-of-turn token are the suffix. The model's own ids are
 * never re-tokenized: the suffix is appended to them as ids. */
#ifndef GRPO_TOOLS_TOOL_TURN_H
#define GRPO_TOOLS_TOOL_TURN_H

#include <jansson.h>

#include "core/check.h"
#include "tokenizer/tokenizer.h"

/* The suffix ids for tool_messages (a non-empty JSON list of {"role": "tool",
 * "name": NAME, "content": TEXT}) appended to out (out->n not reset). kwargs:
 * the chat template variables (chat_template_kwargs; NULL none). -1 with err
 * when the template fails or does not render the conversation with the
 * shorter one as its prefix (TRL's "Unexpected tokenization"). */
int tool_suffix_ids(Tokenizer *tok, const json_t *tool_messages, const json_t *kwargs, TokIds *out, GrpoErr *err);

/* The same for any turn: the ids that `added` (a non-empty JSON list of messages)
 * appends to the conversation `before` (a JSON list ending with an assistant
 * turn), up to and with the generation prompt — the ids of before + added
 * rendered with the generation prompt after those of `before` alone, up to its
 * last end-of-turn token — appended to out. what opens the messages ("tool
 * turn", "environment turn"). -1 with err as above. */
int tool_turn_suffix_ids(Tokenizer *tok, const json_t *before, const json_t *added, const json_t *kwargs,
                         const char *what, TokIds *out, GrpoErr *err);

#endif
