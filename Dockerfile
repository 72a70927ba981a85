# The ppsched HTTP service: the solver and the FastAPI app, without torch.
#   docker build -t ppsched . && docker run -p 8000:8000 ppsched
# Settings are PPSCHED_* environment variables (api/service/config.py); PORT sets the port.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PORT=8000 \
    PPSCHED_HOST=0.0.0.0 \
    PPSCHED_DB_PATH=/data/ppsched.sqlite3 \
    PPSCHED_PROFILES_DIR=/app/profiles

WORKDIR /app
COPY pyproject.toml README.md ./
COPY solver ./solver
COPY api ./api
COPY runtime_adapter ./runtime_adapter
COPY profiles ./profiles
# The same two commands tests/api/service/test_install.py runs in a clean virtualenv.
RUN pip install '.[service]' \
    && useradd --create-home --uid 10001 ppsched \
    && mkdir -p /data && chown ppsched /data

USER ppsched
VOLUME /data
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '8000'), timeout=4)"
CMD ["sh", "-c", "exec ppsched serve --port \"$PORT\""]
