# Unit tests of running rdmad as a service: sd_notify, the config file and
# reload rules, metrics. Included from tests/unit/CMakeLists.txt (uses its
# rdmad_unit_test()).
rdmad_unit_test(notifier_test rdmad_notify)
rdmad_unit_test(config_file_test rdmad_config)
target_compile_definitions(config_file_test PRIVATE
  RDMAD_DEFAULT_CONFIG="${PROJECT_SOURCE_DIR}/systemd/rdmad.conf"
  RDMAD_DEPLOY_DIR="${PROJECT_SOURCE_DIR}/deploy")
