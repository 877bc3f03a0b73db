"""Long-term memory for the thinking agent: a knowledge graph of what it saw and did, a quest log.

The parts: `store` (the embedded `ladybug` database or a Neo4j server, one schema), `graph`
(batched writes, Cypher, export), `spec` and `conditions` (what a game folder's `quests.yaml`
declares), `quests` (the quest log and dynamic todos), `world` (`WorldMemory`: steps -> graph),
`navigate` (routes over remembered doors and tiles), `prompt` (the prompt section within a token
budget). The gymnasium wrapper is `metabonk_gym.wrappers.memory.Memory`; see docs/memory.md.

>>> from metabonk_gym.memory import KnowledgeGraph
>>> KnowledgeGraph(None).counts()["Quest"]
0
"""

from metabonk_gym.memory.graph import KnowledgeGraph
from metabonk_gym.memory.prompt import estimate_tokens, memory_text
from metabonk_gym.memory.quests import QuestLog
from metabonk_gym.memory.spec import WorldSpec
from metabonk_gym.memory.store import MemoryStoreError, open_store
from metabonk_gym.memory.world import WorldMemory

__all__ = [
    "KnowledgeGraph",
    "MemoryStoreError",
    "QuestLog",
    "WorldMemory",
    "WorldSpec",
    "estimate_tokens",
    "memory_text",
    "open_store",
]
