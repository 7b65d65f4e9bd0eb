# The kinflow API for docker-compose (it talks to the MongoDB service; no embedded lake).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY kinflow ./kinflow
COPY examples ./examples
RUN pip install --no-cache-dir .
ENV KINFLOW_HOST=0.0.0.0 KINFLOW_PORT=8080
EXPOSE 8080
CMD ["kinflow", "serve"]
