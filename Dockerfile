# context-proxy: slim Python, non-root, tiktoken encodings baked in so the image runs offline.
# Layers go from least to most often changed: the dependencies and the encodings are
# installed from pyproject.toml alone, so editing the code rebuilds only the last layers.
#
# Build arguments:
#   BASE_IMAGE      an image with `python` (3.11 or later) and `pip` on PATH, as the official
#                   slim image has them in /usr/local/bin (tests/image/build_base.sh makes one
#                   from Debian packages for machines that can reach no image registry).
#   BAKE_ENCODINGS  1: fetch cl100k_base and o200k_base at build time; 0: do not (a build
#                   that reaches no download host; the proxy then counts with the encodings
#                   it can load, and falls back on the offline one it ships).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ARG BAKE_ENCODINGS=1

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TIKTOKEN_CACHE_DIR=/opt/tiktoken

WORKDIR /app

# 1. Dependencies only (read from pyproject.toml), then the encodings they will need.
#    The cache directory is left writable by the image's user, so that an encoding the
#    image did not bake (and the offline fallback, which tiktoken also caches) can be
#    stored at run time; it is sticky and root-owned, so the baked files cannot be
#    replaced by that user.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
      > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt "setuptools>=68" \
 && rm /tmp/requirements.txt \
 && mkdir -p "$TIKTOKEN_CACHE_DIR" \
 && case "$BAKE_ENCODINGS" in \
      1) python -c "import tiktoken; [tiktoken.get_encoding(n) for n in ('cl100k_base', 'o200k_base')]" ;; \
      0) echo "BAKE_ENCODINGS=0: no encodings baked into $TIKTOKEN_CACHE_DIR" ;; \
      *) echo "BAKE_ENCODINGS must be 0 or 1, not '$BAKE_ENCODINGS'" >&2; exit 1 ;; \
    esac \
 && chown -R 0:10001 "$TIKTOKEN_CACHE_DIR" \
 && chmod 1775 "$TIKTOKEN_CACHE_DIR"

# 2. The code itself: nothing is fetched again (--no-deps, and the build backend is already in).
COPY README.md ./
COPY proxy ./proxy
RUN pip install --no-deps --no-build-isolation . && rm -rf build context_proxy.egg-info
COPY config.yaml ./

RUN mkdir -p /app/.data && chown 10001:10001 /app/.data
USER 10001:10001

EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status != 200)"]
# Listening on all interfaces: with an upstream key and no gateway key, `serve` refuses to
# start (create one with `context-proxy keys create NAME`, or set CONTEXT_PROXY_ALLOW_ANONYMOUS=true).
CMD ["context-proxy", "serve", "--host", "0.0.0.0", "--port", "8080"]
