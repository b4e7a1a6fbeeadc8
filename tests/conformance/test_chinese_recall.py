"""Keyword recall for Chinese, mixed Chinese/English and stemmed English, on every backend."""

from __future__ import annotations

import pytest

from .conftest import Store

T = "tenant-a"
NS = ("user", "u1", "memories")

DOCS = {
    "coffee": "用户说他每天早上都喜欢喝一杯咖啡，但是下午不喝",
    "tea": "这位客户不喜欢咖啡因，所以平时只喝绿茶和乌龙茶",
    "feishu": "昨天的飞书消息推送失败了，需要排查一下网关日志",
    "pg": "团队决定把 PostgreSQL 数据库 升级到 16 版本",
    "meeting": "会议纪要：项目延期到下周三，负责人是小王",
    "painting": "She spent the weekend painting the kitchen walls",
    "english": "The deployment pipeline failed on the staging cluster",
}


@pytest.fixture
async def seeded(store: Store) -> Store:
    """A store holding the documents above (and a decoy in another tenant)."""
    for key, text in DOCS.items():
        await store.put(T, NS, key, text)
    await store.put("tenant-b", NS, "decoy", "咖啡 茶 飞书 PostgreSQL 数据库 paint")
    return store


async def found(store: Store, query: str) -> list[str]:
    return [hit.item.key for hit in await store.search(T, query=query, limit=20)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("咖啡", {"coffee", "tea"}),
        ("飞书", {"feishu"}),
        ("会议", {"meeting"}),
        ("数据库", {"pg"}),
        ("推送失败", {"feishu"}),
        ("延期", {"meeting"}),
    ],
)
async def test_two_or_more_chinese_characters_match_inside_sentences(
    seeded: Store, query: str, expected: set[str]
) -> None:
    """Multi-character Chinese queries find the sentences containing them, and only those."""
    assert set(await found(seeded, query)) == expected


async def test_one_chinese_character_matches_inside_sentences(seeded: Store) -> None:
    """A single-character query (茶) finds the sentence where it occurs."""
    assert await found(seeded, "茶") == ["tea"]


async def test_more_occurrences_rank_higher(seeded: Store) -> None:
    """The document that mentions 茶 twice outranks one that mentions it once."""
    await seeded.put(T, NS, "once", "下午茶时间到了，大家一起休息一下吧各位同事们")
    assert (await found(seeded, "茶"))[0] == "tea"


async def test_mixed_chinese_and_english_query(seeded: Store) -> None:
    """The mixed query "PostgreSQL 数据库" finds the mixed sentence first."""
    hits = await found(seeded, "PostgreSQL 数据库")
    assert hits[0] == "pg"
    assert await found(seeded, "postgresql") == ["pg"]


async def test_chinese_question_recalls_the_memory(seeded: Store) -> None:
    """A natural question ("用户喜欢喝什么咖啡？") ranks the coffee memory first."""
    assert (await found(seeded, "用户喜欢喝什么咖啡？"))[0] == "coffee"


@pytest.mark.parametrize("query", ["paint", "painting", "paints", "painted", "Painting"])
async def test_english_stemming(seeded: Store, query: str) -> None:
    """English queries match other inflections of the same stem."""
    assert await found(seeded, query) == ["painting"]


async def test_english_words_in_english_text(seeded: Store) -> None:
    """Plain English recall works beside Chinese (deploy -> deployment, fails -> failed)."""
    assert await found(seeded, "deploy fails") == ["english"]


async def test_unrelated_chinese_finds_nothing(seeded: Store) -> None:
    """A Chinese query sharing no character pair with any memory returns nothing."""
    assert await found(seeded, "火箭发射") == []


async def test_recall_never_leaves_the_tenant(seeded: Store) -> None:
    """The other tenant's decoy, which matches every query, is never returned."""
    for query in ("咖啡", "茶", "飞书", "PostgreSQL 数据库", "paint"):
        assert "decoy" not in await found(seeded, query)
