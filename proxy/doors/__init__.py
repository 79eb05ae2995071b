"""Client-side adapters, one per wire API: its request as the core's `ChatRequest`, the
core's answer (always Chat Completions) in its shapes (`base.Door`).

`chat` (Chat Completions, the core's own), `responses` (OpenAI's Responses API) and
`messages` (Anthropic's Messages API). Each door's HTTP handler lives in `proxy/handlers/`.
"""
