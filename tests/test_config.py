"""The gateway config file (`champollion serve --family gateway --config`):
every address form gRPC resolves is accepted, and a config that cannot work
is refused with one line naming the file and the field or line."""
import pytest

from gateway.server.config import ConfigError, load_config


def write(tmp_path, text: str):
    path = tmp_path / "gateway.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_address_form_and_setting_is_read(tmp_path):
    config = load_config(write(tmp_path, """
families:
  surface: localhost:50061
  semantic: "[::1]:50063"
  behavioral: ipv4:127.0.0.1:50064,127.0.0.1:50065
  compliance: dns://127.0.0.1:5353/compliance.example:50066
  structural:
    routes: {crk: ca-west.example:50062, nob: "dns:///eu-north.example:50062"}
    default: 10.0.0.5:50062
batch_size: 32
deadline_seconds: 2.5
max_in_flight: 4
"""))
    assert (config.batch_size, config.deadline_seconds, config.max_in_flight) == (32, 2.5, 4)
    assert config.address_for("structural", "crk") == "ca-west.example:50062"
    assert config.address_for("structural", "nob") == "dns:///eu-north.example:50062"
    assert config.address_for("structural", "spa") == "10.0.0.5:50062"
    assert config.addresses("behavioral") == ["ipv4:127.0.0.1:50064,127.0.0.1:50065"]
    assert config.address_for("semantic", "spa") == "[::1]:50063"


def test_an_empty_file_is_the_defaults(tmp_path):
    config = load_config(write(tmp_path, ""))
    assert (config.families, config.batch_size, config.deadline_seconds, config.max_in_flight) == ({}, 256, 300.0, 16)
    assert (config.upload_idle_seconds, config.upload_deadline_seconds, config.max_open_uploads) == (60.0, 3600.0, 8)


def test_the_upload_limits_are_read(tmp_path):
    config = load_config(write(tmp_path, "upload_idle_seconds: 5\nupload_deadline_seconds: 90.5\n"
                                         "max_open_uploads: 2\n"))
    assert (config.upload_idle_seconds, config.upload_deadline_seconds, config.max_open_uploads) == (5, 90.5, 2)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("families: {surface: [oops\n", "malformed YAML at line 2, column 1: expected ',' or ']'"),
        ("families:\n  surface: a:1\n    structural: b:2\n", "malformed YAML at line 3, column 15"),
        ("- surface\n- structural\n", "must be a mapping with families, batch_size"),
        ("batch_sise: 10\n", "unknown setting(s) batch_sise; known: families, batch_size"),
        ("families: [surface]\n", "families: must be a mapping of family name to address"),
        ("families: {lexical: 'host:1'}\n", "families: unknown family name(s) lexical; known: surface"),
        ("families: {surface: not an address}\n", "families.surface: 'not an address' is not an address"),
        ("families: {surface: surface-host}\n", "families.surface: 'surface-host' is not an address"),
        ("families: {surface: 'host:99999'}\n", "families.surface: 'host:99999' is not an address"),
        ("families: {surface: 'host:'}\n", "families.surface: 'host:' is not an address"),
        ("families: {surface: 'dns:'}\n", "families.surface: 'dns:' is not an address"),
        ("families: {surface: }\n", "families.surface: None is not an address"),
        ("families: {structural: {routes: {crk: 'ca west:1'}}}\n",
         "families.structural.routes.crk: 'ca west:1' is not an address"),
        ("families: {structural: {routes: [crk]}}\n", "families.structural.routes: must be a mapping of language"),
        ("families: {structural: {default: 50062}}\n", "families.structural.default: 50062 is not an address"),
        ("families: {structural: {route: {crk: 'a:1'}}}\n", "families.structural: only 'routes' and 'default'"),
        ("batch_size: 0\n", "batch_size: must be a whole number of at least 1, got 0"),
        ("batch_size: 2.5\n", "batch_size: must be a whole number of at least 1, got 2.5"),
        ("batch_size: many\n", "batch_size: must be a whole number of at least 1, got 'many'"),
        ("max_in_flight: -1\n", "max_in_flight: must be a whole number of at least 1, got -1"),
        ("max_in_flight: true\n", "max_in_flight: must be a whole number of at least 1, got True"),
        ("deadline_seconds: soon\n", "deadline_seconds: must be a positive number of seconds, got 'soon'"),
        ("deadline_seconds: 0\n", "deadline_seconds: must be a positive number of seconds, got 0"),
        ("deadline_seconds: .inf\n", "deadline_seconds: must be a positive number of seconds, got inf"),
        ("upload_idle_seconds: 0\n", "upload_idle_seconds: must be a positive number of seconds, got 0"),
        ("upload_idle_seconds: -1\n", "upload_idle_seconds: must be a positive number of seconds, got -1"),
        ("upload_idle_seconds: soon\n", "upload_idle_seconds: must be a positive number of seconds, got 'soon'"),
        ("upload_deadline_seconds: .inf\n", "upload_deadline_seconds: must be a positive number of seconds, got inf"),
        ("upload_deadline_seconds: true\n", "upload_deadline_seconds: must be a positive number of seconds, got True"),
        ("max_open_uploads: 0\n", "max_open_uploads: must be a whole number of at least 1, got 0"),
        ("max_open_uploads: 2.5\n", "max_open_uploads: must be a whole number of at least 1, got 2.5"),
    ],
)
def test_a_bad_config_names_file_and_field(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert expected in message


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"nowhere\.yaml: cannot read: No such file or directory"):
        load_config(tmp_path / "nowhere.yaml")


def test_serve_with_a_bad_config_exits_2_with_one_line(cli, tmp_path):
    path = write(tmp_path, "families: {surface: 'host:0'}\n")
    result = cli("serve", "--family", "gateway", "--config", path, "--port", "0")
    assert result.exit_code == 2
    assert result.stderr == f"champollion: error: {path}: families.surface: 'host:0' is not an address: " \
                            "give host:port (port 1-65535) or a gRPC target such as dns:///name:port\n"
