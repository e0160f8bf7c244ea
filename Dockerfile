# A Spark Connect server (pyspark 4.3 from PyPI, local mode, Java 17) with pyspark-mysql-cdc installed in the
# Python its workers run, so remote clients (the thin `pyspark-client` + this package) run batch AND streaming
# queries. Every install step is docker/install.sh (scripts/image_chroot.sh runs the same script in a chroot).
#
#   python -m pip wheel --no-deps -w dist .             # the package's wheel, copied in below
#   docker build -t pyspark-mysql-cdc-connect .
#   docker run -d -p 127.0.0.1:15002:15002 \
#     -v "$PWD/profiles.json:/run/secrets/mysql-cdc-profiles.json:ro" \
#     -e MYSQL_CDC_PROFILES_FILE=/run/secrets/mysql-cdc-profiles.json \
#     -v cdc-data:/var/lib/mysql-cdc pyspark-mysql-cdc-connect
#
# BASE: any Debian bookworm root with or without Python 3.10+ (install.sh adds Debian's python3 when missing);
# the client's Python must have the same minor version as the server's (3.11 here).
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}
ARG PYSPARK_VERSION=4.3.0

# the slow layer (Java, Python, pyspark) first, so a new wheel only redoes the last one
COPY docker/install.sh /tmp/mysql-cdc-build/install.sh
RUN PYSPARK_VERSION="${PYSPARK_VERSION}" bash /tmp/mysql-cdc-build/install.sh --base
COPY docker/start-connect.sh docker/healthcheck.sh /tmp/mysql-cdc-build/
COPY dist/pyspark_mysql_cdc-*.whl /tmp/mysql-cdc-build/wheels/
RUN bash /tmp/mysql-cdc-build/install.sh --package /tmp/mysql-cdc-build/wheels && rm -rf /tmp/mysql-cdc-build

# no profile or password in the image: a mounted JSON file (MYSQL_CDC_PROFILES_FILE) or MYSQL_CDC_PROFILE_<NAME>
ENV SPARK_HOME=/opt/mysql-cdc/spark \
    PYSPARK_PYTHON=/opt/mysql-cdc/venv/bin/python \
    PATH=/opt/mysql-cdc/venv/bin:$PATH \
    MYSQL_CDC_CONNECT_BIND=0.0.0.0 \
    MYSQL_CDC_CONNECT_PORT=15002
USER 185:185
WORKDIR /var/lib/mysql-cdc
EXPOSE 15002
HEALTHCHECK --interval=30s --timeout=10s --start-period=90s --retries=3 CMD ["/opt/mysql-cdc/healthcheck.sh"]
# tini reaps the Python workers' leftovers; start-connect.sh hands `docker stop`'s SIGTERM to the JVM
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/mysql-cdc/start-connect.sh"]
