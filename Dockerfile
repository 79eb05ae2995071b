# context-proxy: slim Python, non-root, tiktoken encodings baked in so the image runs offline.
# Layers go from least to most often changed: the dependencies and the encodings are
# installed from pyproject.toml alone, so editing the code rebuilds only the last layers.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TIKTOKEN_CACHE_DIR=/opt/tiktoken

WORKDIR /app

# 1. Dependencies only (read from pyproject.toml), then the encodings they will need.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
      > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt "setuptools>=68" \
 && python -c "import tiktoken; [tiktoken.get_encoding(n) for n in ('cl100k_base', 'o200k_base')]" \
 && rm /tmp/requirements.txt

# 2. The code itself: nothing is fetched again (--no-deps, and the build backend is already in).
COPY README.md ./
COPY proxy ./proxy
RUN pip install --no-deps --no-build-isolation .
COPY config.yaml ./

RUN mkdir -p /app/.data && chown 10001:10001 /app/.data
USER 10001:10001

EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status != 200)"]
# Listening on all interfaces: with an upstream key and no gateway key, `serve` refuses to
# start (create one with `context-proxy keys create NAME`, or set CONTEXT_PROXY_ALLOW_ANONYMOUS=true).
CMD ["context-proxy", "serve", "--host", "0.0.0.0", "--port", "8080"]
