"""Adapters that govern memory stores people already run (LangChain, LangGraph) through a :class:`memworth.Sidecar`.

Each lives in its own module and imports its framework there, so ``import memworth``
never needs LangChain or LangGraph: ``from memworth.adapters.langchain import
GovernedRetriever`` (extra ``langchain``), ``from memworth.adapters.langgraph import
GovernedStore`` (extra ``langgraph``).
"""

__all__: list[str] = []
