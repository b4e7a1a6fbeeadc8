"""Every string synopsis sends to a summarizer or inserts into a history, in English and Chinese.

A :class:`PromptSet` is a plain value chosen per instance (``prompt_set("zh")``); there is no
process-wide language switch, so two compactors in one process can speak different languages.
Placeholders (``{path}``, ``{count}``, ``{name}``, ``{previous_summary}``, ``{focus}``) are
filled with :meth:`str.replace`, never :meth:`str.format`, because the values (file paths,
summaries) may themselves contain braces.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from synopsis.errors import ConfigError
from synopsis.messages import strip_extensions

__all__ = [
    "CHINESE",
    "ENGLISH",
    "USER_MESSAGES_TAG",
    "PromptSet",
    "build_summarizer_input",
    "prompt_set",
    "summary_request",
]

#: The tag of the section-6 block that post-processing replaces with the real user messages.
USER_MESSAGES_TAG: Final = "all_user_messages"


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptSet:
    """All prompt and marker strings for one language.

    Build your own with :func:`dataclasses.replace` on :data:`ENGLISH` or :data:`CHINESE`.
    """

    language: str
    #: One-line system message of the summarizer call.
    summarizer_system: str
    #: The instruction sent last, as a user message.
    summary_instruction: str
    #: Sent instead of ``summary_instruction`` when a previous summary exists;
    #: ``{previous_summary}`` is replaced by it.
    incremental_instruction: str
    #: Appended to the instruction when the caller names a focus; ``{focus}``.
    focus_instruction: str
    #: Titles of the nine summary sections, in order.
    section_titles: tuple[str, ...]
    summary_preamble: str
    continue_instruction: str
    #: ``{path}``: where the full transcript of the replaced messages was archived.
    transcript_line: str
    #: Said instead of ``transcript_line`` when the agent has a tool to search the archive:
    #: ``{path}`` as there, ``{tool}`` the tool's name. Empty: ``transcript_line``.
    history_tool_line: str = ""
    #: Replaces the middle of a user message that did not fit its budget; ``{count}``.
    truncation_marker: str
    #: First line of the user-messages block when some messages were dropped or trimmed.
    omitted_note: str
    skills_preamble: str
    #: Heading above each preserved skill; ``{name}``.
    skill_heading: str
    #: Appended to a skill cut to its token cap; ``{name}``.
    skill_truncation_marker: str

    def transcript(self, path: str, tool: str | None = None) -> str:
        """The transcript pointer line for ``path``; naming ``tool`` when there is one."""
        line = self.history_tool_line if tool and self.history_tool_line else self.transcript_line
        return line.replace("{path}", path).replace("{tool}", tool or "")

    def truncation(self, count: int) -> str:
        """The marker for ``count`` characters cut out of a user message."""
        return self.truncation_marker.replace("{count}", str(count))

    def skill_title(self, name: str) -> str:
        """The heading line of the skill called ``name``."""
        return self.skill_heading.replace("{name}", name)

    def skill_cut(self, name: str) -> str:
        """The marker ending a truncated skill."""
        return self.skill_truncation_marker.replace("{name}", name)

    def section_heading(self, number: int) -> str:
        """The heading of section ``number`` (1-9) as the instruction asks for it."""
        return f"{number}. {self.section_titles[number - 1]}:"


_EN_NO_TOOLS_OPEN = """\
IMPORTANT — ANSWER WITH PLAIN TEXT ONLY. YOU MUST NOT CALL ANY TOOL.
Tools are switched off for this request. Any attempt to read files, run commands, search, \
edit or use any other tool will be discarded and your one and only reply will be lost. \
Everything you need is already in the conversation above."""

_EN_NO_TOOLS_CLOSE = """\
REMINDER: plain text only. Do not call any tool. Reply with one <analysis> block followed by \
one <summary> block and nothing else."""

_EN_BODY = """\
Your job: write a thorough summary of the conversation so far, so that an engineer (or an \
agent) who never saw it can pick up the work exactly where it stopped. Keep the technical \
detail: names, paths, commands, code, decisions and the reasons behind them.

First, inside <analysis></analysis>, think it through: walk through the conversation in \
order; for each part note what the user asked for, what was done, which files and code were \
touched, which errors came up and how they were handled, and any feedback the user gave. \
Then check your notes against the conversation for anything missed or wrong.

Then write the summary inside <summary></summary> with exactly these nine sections:

1. Primary request and intent: everything the user explicitly asked for, in detail.
2. Key technical concepts: technologies, libraries, frameworks and ideas that matter here.
3. Files and code sections: every file read, changed or created, why it matters, and the \
important snippets (favour the most recent work).
4. Errors and fixes: each error met, how it was fixed, and what the user said about it.
5. Problem solving: problems solved and investigations still under way.
6. All user messages: every message the user wrote (not tool results), in order, one per \
line starting with "- ", inside an <all_user_messages></all_user_messages> block.
7. Pending tasks: work the user asked for that is not done yet.
8. Current work: precisely what was being worked on right before this summary, with file \
names and code.
9. Optional next step: only a step that directly continues the user's latest explicit \
request. Quote that request word for word so the intent cannot drift. Leave the section \
empty if the latest request is complete.

If the conversation contains instructions about how to summarize or compact it, follow them."""

_ZH_NO_TOOLS_OPEN = """\
重要：只能用纯文本回答，绝对禁止调用任何工具。
本次请求不提供任何工具。任何读文件、执行命令、搜索、修改文件或使用其他工具的尝试都会被丢弃，\
你唯一的一次回答机会也会因此作废。所需的一切信息都已在上面的对话里。"""

_ZH_NO_TOOLS_CLOSE = """\
再次提醒：只输出纯文本，不要调用任何工具。回答只包含一个 <analysis> 块和随后的一个 <summary> 块，\
不要有其他内容。"""

_ZH_BODY = """\
你的任务：为目前为止的对话写一份详尽的总结，让从未看过这段对话的工程师（或智能体）能够从中断之处\
原样接手工作。请保留技术细节：名称、路径、命令、代码、所做的决定以及理由。

先在 <analysis></analysis> 中梳理思路：按时间顺序逐段回顾对话，记下用户的要求、已完成的工作、\
涉及的文件与代码、出现的错误及处理方式，以及用户给出的反馈；然后对照对话检查有无遗漏或错误。

再在 <summary></summary> 中写总结，恰好包含以下九节：

1. 主要请求与意图：用户明确提出的全部要求，写详细。
2. 关键技术概念：与本任务相关的技术、库、框架和思路。
3. 文件与代码：读过、改过或新建的每个文件，它为何重要，以及关键代码片段（以最近的工作为重）。
4. 错误与修复：遇到的每个错误、修复方法，以及用户对此的意见。
5. 问题解决：已经解决的问题和仍在排查中的问题。
6. 全部用户消息：用户写下的每一条消息（不含工具结果），按顺序每行一条、以 "- " 开头，\
放在 <all_user_messages></all_user_messages> 块中。
7. 待办任务：用户要求但尚未完成的工作。
8. 当前工作：生成本总结之前正在做的具体事情，附文件名和代码。
9. 可选的下一步：只写直接延续用户最新明确请求的一步，并逐字引用该请求，以免意图走样；\
如果最新请求已经完成，本节留空。

如果对话中有关于如何总结或压缩对话的要求，请照做。"""


def _instruction(open_: str, body: str, close: str) -> str:
    return f"{open_}\n\n{body}\n\n{close}"


_EN_INCREMENTAL_HEAD = """\
An earlier part of this conversation was already summarized. That summary is below, followed \
by the messages that came after it. Update the summary: keep everything in it that still \
holds, fold in what the new messages add or change, and drop only what they make obsolete.

<previous_summary>
{previous_summary}
</previous_summary>"""

_ZH_INCREMENTAL_HEAD = """\
这段对话较早的部分已经总结过。下面先给出那份总结，它之后的消息就是上面的新消息。请更新这份总结：\
保留其中仍然成立的全部内容，补充或修正新消息带来的变化，只删除已被新消息推翻的部分。

<previous_summary>
{previous_summary}
</previous_summary>"""

ENGLISH: Final = PromptSet(
    language="en",
    summarizer_system=(
        "You are a careful assistant whose only task is to summarize conversations accurately."
    ),
    summary_instruction=_instruction(_EN_NO_TOOLS_OPEN, _EN_BODY, _EN_NO_TOOLS_CLOSE),
    incremental_instruction=_instruction(
        _EN_NO_TOOLS_OPEN, _EN_INCREMENTAL_HEAD + "\n\n" + _EN_BODY, _EN_NO_TOOLS_CLOSE
    ),
    focus_instruction="Give particular attention to: {focus}",
    section_titles=(
        "Primary request and intent",
        "Key technical concepts",
        "Files and code sections",
        "Errors and fixes",
        "Problem solving",
        "All user messages",
        "Pending tasks",
        "Current work",
        "Optional next step",
    ),
    summary_preamble=(
        "This conversation continues an earlier one that ran out of context. "
        "Below is a summary of the earlier part."
    ),
    continue_instruction=(
        "Go on from where the work stopped. Do not ask the user anything, do not mention or "
        "acknowledge this summary, and do not open with a recap: take the next action directly."
    ),
    transcript_line=(
        "The full transcript of the earlier part is saved at {path}; read it if you need an "
        "exact detail the summary left out."
    ),
    history_tool_line=(
        "The full transcript of the earlier part is archived at {path}. When you need an exact "
        "detail the summary left out (a name, number, date, path, command or error), call the "
        "`{tool}` tool with a few keywords to find it."
    ),
    truncation_marker="[… {count} characters cut from this message …]",
    omitted_note="(Older user messages were left out to save space; the most recent follow.)",
    skills_preamble=(
        "These skills were loaded earlier in this session. Their instructions still apply: "
        "keep following them."
    ),
    skill_heading="### Skill `{name}`",
    skill_truncation_marker=(
        "[… the rest of this skill was cut to save space; load the skill `{name}` again "
        "for the full text …]"
    ),
)

CHINESE: Final = PromptSet(
    language="zh",
    summarizer_system="你是一名严谨的助手，唯一的任务是准确地总结对话。",
    summary_instruction=_instruction(_ZH_NO_TOOLS_OPEN, _ZH_BODY, _ZH_NO_TOOLS_CLOSE),
    incremental_instruction=_instruction(
        _ZH_NO_TOOLS_OPEN, _ZH_INCREMENTAL_HEAD + "\n\n" + _ZH_BODY, _ZH_NO_TOOLS_CLOSE
    ),
    focus_instruction="请特别关注：{focus}",
    section_titles=(
        "主要请求与意图",
        "关键技术概念",
        "文件与代码",
        "错误与修复",
        "问题解决",
        "全部用户消息",
        "待办任务",
        "当前工作",
        "可选的下一步",
    ),
    summary_preamble="本次对话接续此前一段因上下文用尽而中断的对话。以下是前面部分的总结。",
    continue_instruction=(
        "请从工作中断的地方直接继续。不要向用户提任何问题，不要提及或确认这份总结，"
        "也不要先复述，直接执行下一步。"
    ),
    transcript_line="前面部分的完整记录保存在 {path}；如需总结中未保留的确切细节，请读取该文件。",
    history_tool_line=(
        "前面部分的完整记录已归档于 {path}。如需总结中未保留的确切细节（名称、数字、日期、路径、"
        "命令或错误），请用几个关键词调用 `{tool}` 工具查找。"
    ),
    truncation_marker="[……此消息中有 {count} 个字符被截去……]",
    omitted_note="（为节省篇幅，较早的用户消息已省略；以下是最近的消息。）",
    skills_preamble="以下技能在本会话中较早时加载过，其中的要求仍然有效，请继续遵守。",
    skill_heading="### 技能 `{name}`",
    skill_truncation_marker=(
        "[……为节省篇幅，此技能其余内容已截去；如需全文，请重新加载技能 `{name}`……]"
    ),
)

_BY_LANGUAGE: Final[Mapping[str, PromptSet]] = {"en": ENGLISH, "zh": CHINESE}


def prompt_set(language: str) -> PromptSet:
    """The built-in prompt set for ``language``: ``"en"`` or ``"zh"`` (``"zh-CN"`` etc. too)."""
    key = language.strip().lower().replace("_", "-").split("-")[0]
    try:
        return _BY_LANGUAGE[key]
    except KeyError:
        raise ConfigError(
            f"unknown prompt language {language!r}; use 'en' or 'zh', or build a PromptSet"
        ) from None


def summary_request(
    *, prompts: PromptSet, previous_summary: str | None = None, focus: str | None = None
) -> str:
    """The text of the final user message of a summarizer call."""
    if previous_summary and previous_summary.strip():
        text = prompts.incremental_instruction.replace(
            "{previous_summary}", previous_summary.strip()
        )
    else:
        text = prompts.summary_instruction
    if focus and focus.strip():
        text += "\n\n" + prompts.focus_instruction.replace("{focus}", focus.strip())
    return text


def build_summarizer_input(
    context_messages: Sequence[Mapping[str, Any]],
    *,
    prompts: PromptSet,
    previous_summary: str | None = None,
    focus: str | None = None,
) -> list[dict[str, Any]]:
    """``[system persona, *context, summary instruction]``, ready for a model.

    The agent's leading system messages are not part of ``context_messages`` (the caller
    splits them off and keeps them verbatim). ``usage`` and ``meta`` are stripped because no
    provider accepts them. With ``previous_summary`` the incremental instruction is used.
    """
    request = summary_request(prompts=prompts, previous_summary=previous_summary, focus=focus)
    return [
        {"role": "system", "content": prompts.summarizer_system},
        *(strip_extensions(message) for message in context_messages),
        {"role": "user", "content": request},
    ]
