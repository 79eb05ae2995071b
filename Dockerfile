# context-proxy: slim Python, non-root, tiktoken encodings baked in so the image runs offline.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    TIKTOKEN_CACHE_DIR=/opt/tiktoken

WORKDIR /app
COPY pyproject.toml README.md ./
COPY proxy ./proxy
RUN pip install . \
 && python -c "import tiktoken; [tiktoken.get_encoding(n) for n in ('cl100k_base', 'o200k_base')]"
COPY config.yaml ./

RUN useradd --create-home --uid 10001 proxy \
 && mkdir -p /app/.data \
 && chown proxy /app/.data
USER proxy

EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s \
  CMD python -c "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status != 200)"
CMD ["context-proxy", "serve", "--host", "0.0.0.0", "--port", "8080"]
