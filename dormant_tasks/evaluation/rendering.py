"""Prompt rendering under a chat template as the paper's authors ran it (lm-eval 0.4.5), written for this project
(docs/SCORES.md §6, "Prompt rendering under a chat template": where 0.4.5 and 0.4.13 differ).

0.4.5's rules, from its `ConfigurableTask.fewshot_context`, `ContextSampler.get_chat_context` and
`HFLM.apply_chat_template`:
- messages: a system turn when there is a system instruction or a task description (`instruction +
  fewshot_delimiter + description` when both); then per few-shot example a user turn (the example's text, or
  for an index its choice) and an assistant turn (the target, or the indexed choice; no delimiter); then
- a text question: one more user turn; rendered once, with the generation prompt (the assistant's header);
- an index question (multiple inputs, WinoGrande): the conversation so far is rendered with the generation
  prompt and each choice is appended to it as text: one context per choice;
- requests: multiple choice `(context, delimiter + choice)` per choice, or with multiple inputs
  `(context + choice, delimiter + target)`; generation `(context, the task's generation arguments)`.
The few-shot examples are the ones lm-eval's sampler draws (`lmeval_adapter.items_with_fewshot`).
"""

from __future__ import annotations

from copy import deepcopy

from dormant_tasks.errors import EvaluationError

PAPER_LM_EVAL_VERSION = "0.4.5"  # the version whose chat rendering `Rendering.PAPER` reproduces
RENDERED_AS = {"paper": f"lm-eval {PAPER_LM_EVAL_VERSION} (paper)", "lm-eval": "lm-eval 0.4.13"}  # in words


def chat_text(chat: bool, rendering: str | None) -> str:
    """A protocol's chat template in words, as every line that names the protocol says it."""
    if not chat:
        return "no chat template"
    return "chat template" + (f" rendered as {RENDERED_AS[rendering]}" if rendering in RENDERED_AS else "")


def _system_prompt(task, doc, system_instruction: str | None) -> str:
    from lm_eval.utils import apply_template

    description = task.config.description
    description = apply_template(description, doc) if description else ""
    if system_instruction is not None and description:
        return f"{system_instruction}{task.config.fewshot_delimiter}{description}"
    if system_instruction is not None:
        return system_instruction
    return description


def _fewshot_fields(task) -> tuple:
    """The few-shot config's doc_to_text / doc_to_target / doc_to_choice overrides (None: the task's own)."""
    cfg = task.config.fewshot_config or {}
    get = cfg.get if isinstance(cfg, dict) else lambda k, d=None: getattr(cfg, k, d)
    return get("doc_to_text", None), get("doc_to_target", None), get("doc_to_choice", None)


def _example_turns(task, fs_doc) -> list[dict]:
    """One few-shot example as 0.4.5's multi-turn sampler wrote it: user = the text (or its indexed choice),
    assistant = the target (its first item for a list, its indexed choice for an index), no delimiter."""
    text_override, target_override, choice_override = _fewshot_fields(task)
    text = task.doc_to_text(fs_doc, text_override) if text_override else task.doc_to_text(fs_doc)
    target = task.doc_to_target(fs_doc, target_override) if target_override else task.doc_to_target(fs_doc)
    no_choices = task.config.doc_to_choice is None

    def choices():
        return task.doc_to_choice(fs_doc, choice_override) if choice_override else task.doc_to_choice(fs_doc)

    user = text if no_choices or isinstance(text, str) else choices()[text]
    if isinstance(target, list):
        answer = str(target[0])
    elif no_choices or isinstance(target, str):
        answer = target
    else:
        answer = str(choices()[target])
    return [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]


def paper_chat_messages(task, doc, fewshot_docs, system_instruction: str | None = None):
    """(messages before the question, the question) of one item under 0.4.5's multi-turn rendering; the question
    is a string (a final user turn), a list of strings (one conversation each), or None for multiple inputs
    (the choices are appended after the rendered conversation)."""
    messages: list[dict] = []
    system = _system_prompt(task, doc, system_instruction)
    if system:
        messages.append({"role": "system", "content": system})
    for fs_doc in fewshot_docs:
        messages += _example_turns(task, fs_doc)
    if task.multiple_input:
        return messages, None
    question = task.doc_to_text(doc)
    if isinstance(question, int):
        question = task.doc_to_choice(doc)[question] if task.config.doc_to_choice is not None else str(question)
    return messages, question


def paper_chat_contexts(task, doc, fewshot_docs, chat_template, system_instruction: str | None = None):
    """The context(s) 0.4.5 gives `construct_requests` for one item: a string, or for multiple inputs one
    string per choice (the rendered conversation + the choice)."""
    messages, question = paper_chat_messages(task, doc, fewshot_docs, system_instruction)
    if question is None:
        head = chat_template(messages)
        return [head + choice for choice in task.doc_to_choice(doc)]
    if isinstance(question, list):
        return [chat_template(messages + [{"role": "user", "content": q}]) for q in question]
    return chat_template(messages + [{"role": "user", "content": question}])


def paper_arguments(task, doc, context) -> list[tuple]:
    """The request arguments 0.4.5's `construct_requests` made from `context`: the target delimiter kept."""
    from dormant_tasks.evaluation import lmeval_adapter

    output_type = task.config.output_type
    delimiter = task.config.target_delimiter
    if output_type == "multiple_choice":
        if task.multiple_input:
            target = task.doc_to_target(doc)
            return [(c, f"{delimiter}{target}") for c in context]
        if not isinstance(context, str):
            raise EvaluationError(f"{task.config.task}: a list of questions per item is not a multiple-choice prompt")
        args = [(context, f"{delimiter}{choice}") for choice in task.doc_to_choice(doc)]
        if lmeval_adapter.uses_mutual_info(task):  # 0.4.5: the unconditional choices, without the delimiter
            args += [("", f"{choice}") for choice in task.doc_to_choice(doc)]
        return args
    if output_type == "generate_until":
        return [(context, deepcopy(task.config.generation_kwargs))]
    if output_type == "loglikelihood":
        return [(context, task.doc_to_target(doc))]
    raise EvaluationError(
        f"{task.config.task}: {output_type} requests have no paper rendering; use --rendering lm-eval"
    )


def build_paper_chat_requests(
    task, chat_template, *, limit: int | None, seed: int | None = None, system_instruction: str | None = None
):
    """Every request of `task` (its first `limit` items) as lm-eval 0.4.5 built it under a chat template with
    few-shot turns; lm-eval `Instance`s in the order 0.4.13's `build_all_requests` makes them."""
    from dormant_tasks.evaluation import lmeval_adapter

    if task.config.doc_to_image or task.config.doc_to_audio:
        raise EvaluationError(f"{task.config.task} is multimodal; the paper rendering covers text tasks only")
    shots = int(task.get_config("num_fewshot") or 0)
    instances = []
    for doc_id, doc, fewshot_docs in lmeval_adapter.items_with_fewshot(task, shots, limit, seed):
        context = paper_chat_contexts(task, doc, fewshot_docs, chat_template, system_instruction)
        arguments = paper_arguments(task, doc, context)
        instances += lmeval_adapter.make_instances(task, doc_id, doc, arguments)
    return instances
