"""Annotation, synthesis, citation checks (DESIGN §9). Importing this package loads no SDK."""

from ragweedd.answer.answering import answer_question, ask, ask_continue, continue_answer, passages_answer
from ragweedd.answer.prompts import NO_LLM_LABEL, REFUSAL, load_prompts

__all__ = ["answer_question", "ask", "ask_continue", "continue_answer", "passages_answer", "load_prompts",
           "REFUSAL", "NO_LLM_LABEL"]
