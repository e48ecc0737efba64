"""Every prompt template of the benchmark, and the pure functions that fill them.

Isolation is structural: the builders for the evaluated model (`lexawn_prompt`,
`force_ask_prompt`, `force_judge_prompt`) take a history and nothing else, so no code path can
hand them `key_details`, focal points or verdicts. Only the User Model and the DCG judge receive
the hidden facts; the verdict extractor receives claim texts and a response, never gold labels.

Each filled template is sent as one user message. The history is rendered as `User: ...` /
`Assistant: ...` lines, every message in order, inside `<对话历史>...</对话历史>`.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from lexpilot_batch.data import KeyDetails, Message
from lexpilot_batch.errors import DataError

LEXAWN = "lexawn"
FORCE_ASK = "force_ask"
FORCE_JUDGE = "force_judge"
LCA_CLASSIFY = "lca_classify"
DCG_JUDGE = "dcg_judge"
USER_MODEL = "user_model"
EXTRACT_VERDICTS = "extract_verdicts"

DEFAULT_TEMPLATES: dict[str, str] = {
    LEXAWN: """你是一名经验丰富的中国执业律师，正在为当事人提供法律咨询。
请阅读下面的对话历史，并以律师的身份给出下一轮回复。

<对话历史>
{history}
</对话历史>

要求：
1. 如果当事人提供的事实已经足以对其诉求作出判断，请直接给出你的法律分析，并对每一项诉讼请求逐项说明法院可能支持、部分支持还是驳回，以及理由。
2. 如果关键事实仍不清楚、会实质影响判断结果，请不要勉强下结论，而是向当事人提出有针对性的澄清问题，说明你需要了解哪些信息以及原因。
3. 只输出你作为律师的这一轮回复，不要替当事人作答。""",
    FORCE_ASK: """你是一名经验丰富的中国执业律师，正在为当事人提供法律咨询。
请阅读下面的对话历史。在本轮回复中，你必须向当事人提出一个澄清问题，以获取对案件判断最关键、目前尚缺失的事实。

<对话历史>
{history}
</对话历史>

要求：
1. 只提出一个问题，问题应具体、明确，直接指向影响案件结果的关键事实。
2. 不要给出法律结论或判决预测，不要重复对话中已经问过或已经回答过的内容。
3. 只输出这个问题本身。""",
    FORCE_JUDGE: """你是一名经验丰富的中国法官，请根据下面对话中当事人目前已经提供的事实，对其诉讼请求作出判断。

<对话历史>
{history}
</对话历史>

要求：
1. 只依据对话中已经提供的事实进行分析，不要假设对话之外的事实，也不要再向当事人提问。
2. 对当事人提出的每一项诉讼请求逐项给出结论（支持、部分支持或驳回），并简要说明法律依据和理由。""",
    LCA_CLASSIFY: """你是一名法律对话分析专家。下面是一段法律咨询的对话历史，以及律师在该历史之后给出的一条新回复。
请只判断这条新回复的性质，不要考虑对话历史中此前的律师发言。

<对话历史>
{history}
</对话历史>

<待分类回复>
{response}
</待分类回复>

分类标准：
- "judgment"（直接判断）：回复对当事人的诉求给出了法律结论或判断，即使附带了少量补充建议。
- "clarification"（澄清询问）：回复的主要目的是向当事人询问尚缺失的事实，而没有给出结论。

请只输出一个 JSON 对象，不要输出其他内容，格式为：{{"label": "judgment"}} 或 {{"label": "clarification"}}""",
    DCG_JUDGE: """你是一名资深法官，负责评估律师提出的澄清问题是否切中案件要害。
下面给出对话历史、律师新提出的问题，以及本案的争议焦点和当事人尚未透露的关键事实。

<对话历史>
{history}
</对话历史>

<追问>
{question}
</追问>

<争议焦点>
{focal_points}
</争议焦点>

<关键事实>
{key_details}
</关键事实>

判断标准：如果该问题针对上述任一争议焦点，或旨在获取上述关键事实中的信息，则回答"是"；否则回答"否"。对话历史中已有的问题不计入评估，只评估<追问>中的新问题。

请只输出一个 JSON 对象，不要输出其他内容，格式为：{{"decision": "是"}} 或 {{"decision": "否"}}""",
    USER_MODEL: """你正在扮演一名向律师咨询的当事人。下面是你与律师的对话历史，最后一条是律师刚刚向你提出的问题。
你掌握以下关于本案的事实（律师尚不知道），请据此如实回答律师的问题。

<对话历史>
{history}
</对话历史>

<争议焦点>
{focal_points}
</争议焦点>

<关键事实>
{key_details}
</关键事实>

要求：
1. 以当事人的口吻、用自然的中文回答，只回答律师问到的内容。
2. 只能依据上面的关键事实作答；如果律师问到的内容在关键事实中没有，请如实说明自己不清楚或没有相关信息，不要编造。
3. 不要给出法律分析，不要替律师下结论。""",
    EXTRACT_VERDICTS: """你是一名法律文书分析专家。下面是一段对案件诉讼请求作出判断的回复，以及该案的诉讼请求列表。
请从回复中提取回复对每一项诉讼请求给出的结论。

<诉讼请求>
{claims}
</诉讼请求>

<回复>
{response}
</回复>

要求：
1. 按诉讼请求列表的顺序，为每一项请求给出且只给出一个标签："支持"、"部分支持" 或 "驳回"。
2. 如果回复没有明确提到某项请求，请根据回复的整体倾向选择最接近的标签。
3. 请只输出一个 JSON 对象，不要输出其他内容，格式为：{{"verdicts": ["支持", "驳回", ...]}}，列表长度必须等于诉讼请求的数量。""",
}

# The slots each template must contain, and may contain: nothing else.
SLOTS: dict[str, frozenset[str]] = {
    LEXAWN: frozenset({"history"}),
    FORCE_ASK: frozenset({"history"}),
    FORCE_JUDGE: frozenset({"history"}),
    LCA_CLASSIFY: frozenset({"history", "response"}),
    DCG_JUDGE: frozenset({"history", "question", "focal_points", "key_details"}),
    USER_MODEL: frozenset({"history", "focal_points", "key_details"}),
    EXTRACT_VERDICTS: frozenset({"claims", "response"}),
}

Templates = Mapping[str, str]


class Prompt(str):
    """A filled template that keeps the pieces it was joined from.

    Every prompt of a case repeats the case's messages, across tasks, rounds and runs. Writing a
    request line escapes and encodes each piece once per case (`lines.request_line`) instead of
    every prompt whole: JSON escaping and UTF-8 encoding both work character by character, so the
    pieces' encodings joined are the whole prompt's.
    """

    parts: tuple[str, ...]
    # How many of `parts` are the prompt's shared part: the template's text up to and including its
    # first slot (the case's history, or its claims), which every run and round of the case repeats
    # while what follows differs. Request lines put a cache breakpoint there (`providers.cache_layout`).
    shared: int
    # Indexes of `parts` inside the shared part where a history message starts (its "\n"
    # separator): a later round's history goes on from the same messages, so a cache can find an
    # earlier round's prefix at one of these (`providers.cache_layout`).
    breaks: tuple[int, ...]

    def __new__(cls, parts: Sequence[str], shared: int = 0, breaks: Sequence[int] = ()) -> Prompt:
        prompt = super().__new__(cls, "".join(parts))
        prompt.parts = tuple(parts)
        prompt.shared = shared
        prompt.breaks = tuple(breaks)
        return prompt

    @property
    def head(self) -> str:
        """The template's opening text (before its first slot): which template the prompt fills."""
        return self.parts[0] if self.shared > 1 else ""


_SPEAKERS = {"user": "User: ", "assistant": "Assistant: "}


def _history_parts(history: Sequence[Message]) -> tuple[str, ...]:
    parts: list[str] = []
    for m in history:
        if parts:
            parts.append("\n")
        parts += (_SPEAKERS[m.role], m.content)
    return tuple(parts)


def render_history(history: Sequence[Message]) -> str:
    """Every message, in order, as `User: ...` / `Assistant: ...` lines."""
    return "".join(_history_parts(history))


@lru_cache(maxsize=64)
def _parsed(template: str) -> tuple[tuple[str, str | None], ...]:
    return tuple((literal, name) for literal, name, _, _ in string.Formatter().parse(template))


def _fill(template: str, **slots: str | tuple[str, ...]) -> Prompt:
    """`template.format(**slots)` as a `Prompt`; a tuple slot is the pieces of its text.

    Equal to `str.format` for the templates `load_templates` admits: named slots, no conversions
    or format specs.
    """
    parts: list[str] = []
    shared = 0
    breaks: list[int] = []
    for literal, name in _parsed(template):
        if literal:
            parts.append(literal)
        if name is not None:
            value = slots[name]
            if isinstance(value, tuple):
                if not shared and name == "history":  # (speaker, content) then ("\n", speaker, content)...
                    breaks = list(range(len(parts) + 2, len(parts) + len(value), 3))
                parts += value
            else:
                parts.append(value)
            shared = shared or len(parts)
    return Prompt(parts, shared, breaks)


def render_focal_points(focal_points: Sequence[str]) -> str:
    return "\n".join(f"{i}. {p}" for i, p in enumerate(focal_points, 1))


def render_key_details(key_details: KeyDetails) -> str:
    """All hidden facts, keeping the focal point each belongs to when they are keyed by one."""
    if isinstance(key_details, str):
        return key_details
    if isinstance(key_details, list):
        return "\n".join(f"- {d}" for d in key_details)
    lines: list[str] = []
    for focal, details in key_details.items():
        lines.append(f"【{focal}】")
        lines.extend([details] if isinstance(details, str) else [f"- {d}" for d in details])
    return "\n".join(lines)


def render_claims(claims: Sequence[str]) -> str:
    return "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))


# --- evaluated model: the history only ---------------------------------------------------------


def lexawn_prompt(history: Sequence[Message], templates: Templates = DEFAULT_TEMPLATES) -> Prompt:
    """The LexAwN response prompt (LCA and every interaction round)."""
    return _fill(templates[LEXAWN], history=_history_parts(history))


def force_ask_prompt(history: Sequence[Message], templates: Templates = DEFAULT_TEMPLATES) -> Prompt:
    """The DCG forced-clarification prompt."""
    return _fill(templates[FORCE_ASK], history=_history_parts(history))


def force_judge_prompt(history: Sequence[Message], templates: Templates = DEFAULT_TEMPLATES) -> Prompt:
    """The direct-prediction prompt shared by Direct, Gold and the forced final interaction turn."""
    return _fill(templates[FORCE_JUDGE], history=_history_parts(history))


# --- judges and the User Model ------------------------------------------------------------------


def lca_classify_prompt(history: Sequence[Message], response: str, templates: Templates = DEFAULT_TEMPLATES) -> Prompt:
    """Classify the new response only; the history is context."""
    return _fill(templates[LCA_CLASSIFY], history=_history_parts(history), response=response)


def dcg_judge_prompt(
    history: Sequence[Message],
    question: str,
    focal_points: Sequence[str],
    key_details: KeyDetails,
    templates: Templates = DEFAULT_TEMPLATES,
) -> Prompt:
    return _fill(
        templates[DCG_JUDGE],
        history=_history_parts(history),
        question=question,
        focal_points=render_focal_points(focal_points),
        key_details=render_key_details(key_details),
    )


def user_model_prompt(
    history: Sequence[Message],
    focal_points: Sequence[str],
    key_details: KeyDetails,
    templates: Templates = DEFAULT_TEMPLATES,
) -> Prompt:
    """The User Model's prompt; `history` ends with the assistant question it answers."""
    return _fill(
        templates[USER_MODEL],
        history=_history_parts(history),
        focal_points=render_focal_points(focal_points),
        key_details=render_key_details(key_details),
    )


def extract_verdicts_prompt(claims: Sequence[str], response: str, templates: Templates = DEFAULT_TEMPLATES) -> Prompt:
    """Claim texts in `result_dict` order and the response; never the gold verdicts."""
    return _fill(templates[EXTRACT_VERDICTS], claims=render_claims(claims), response=response)


# --- overrides ----------------------------------------------------------------------------------


def template_slots(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def _decorated_slots(template: str) -> list[str]:
    """Slots written with a conversion or format spec (`{history!r}`, `{history:>9}`).

    Such a slot either fails only when the template is filled, deep inside a run, or silently
    alters the text it receives (`!r` turns the history's newlines into `\\n`).
    """
    return [
        "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
        for _, name, spec, conv in string.Formatter().parse(template)
        if name is not None and (conv or spec)
    ]


def load_templates(path: Path | None) -> dict[str, str]:
    """The default templates, with any given in the JSON object at `path` replacing theirs."""
    templates = dict(DEFAULT_TEMPLATES)
    if path is None:
        return templates
    try:
        # utf-8-sig: as for the dataset, a byte-order mark from a Windows editor is fine.
        overrides = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise DataError(f"{path}: prompts file not found") from None
    except OSError as exc:
        raise DataError(f"{path}: prompts file cannot be read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a UTF-8 JSON file ({exc}); see docs/dataset.md, 'The prompts'") from None
    if not isinstance(overrides, dict):
        raise DataError(f"{path}: must be a JSON object {{template name: template text}}")
    problems: list[str] = []
    for name, text in overrides.items():
        if name not in SLOTS:
            problems.append(f"{name}: unknown template; known: {', '.join(SLOTS)}")
            continue
        if not isinstance(text, str) or not text.strip():
            problems.append(f"{name}: must be a non-empty string")
            continue
        try:
            found = template_slots(text)
            decorated = _decorated_slots(text)
        except ValueError as exc:
            problems.append(f"{name}: bad braces ({exc}); write literal braces as {{{{ and }}}}")
            continue
        literal = sorted(n for n in found if not n.isidentifier())
        if literal:
            # `{"a": 1}` reads as a slot named `"a"` with the format spec ` 1`: a literal brace.
            problems.append(
                f"{name}: {{{literal[0]}...}} is not a slot: literal braces (a JSON example such as "
                '{"label": "judgment"}) must be doubled, {{"label": "judgment"}}, as the bundled prompts write them'
            )
            found -= set(literal)
            decorated = [d for d in decorated if d[1:].split("!")[0].split(":")[0].isidentifier()]
        if decorated:
            problems.append(
                f"{name}: slot(s) {', '.join(decorated)} carry a conversion or format spec; "
                "write slots plainly, e.g. {history}"
            )
        missing, extra = SLOTS[name] - found, found - SLOTS[name]
        if missing:
            problems.append(f"{name}: missing slot(s) {', '.join('{' + s + '}' for s in sorted(missing))}")
        if extra:
            problems.append(f"{name}: unknown slot(s) {', '.join('{' + s + '}' for s in sorted(extra))}")
        templates[name] = text
    if problems:
        raise DataError(f"{path}: invalid prompts file", problems)
    return templates


def templates_hash(templates: Templates) -> str:
    blob = json.dumps(dict(sorted(templates.items())), ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()
