"""A labelled corpus for redaction: realistic snippets with planted values and near-misses.

``build_corpus(seed)`` fills templates (English and Chinese chat turns, ``env`` dumps, stack
traces, config files, curl commands, log lines, JSON tool output) with freshly generated
values, and records where each one went:

* ``planted``: values that must be redacted, with their kind; every one is generated to match
  its format (checksums included) and none is a real credential: AWS keys follow the
  documented example shape, phone numbers use fictional ranges (555-01xx, Ofcom drama numbers),
  everything else is random;
* ``near_misses``: strings that look alike and must survive untouched (Luhn-invalid cards,
  17-digit and checksum-invalid ID numbers, versions, UUIDs, git SHAs, base64 that is not a
  JWT, ``sk-`` in prose, ``@decorator``, order numbers, placeholders, ...).

Deterministic: the same seed gives the same corpus. Slots are ``{{kind}}`` or
``{{kind:variant}}`` for planted values and ``{{~name}}`` for near-misses.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from dataclasses import dataclass
from typing import Final

from synopsis.redact import Redactor

__all__ = ["KINDS", "Planted", "Sample", "build_corpus", "lone_value"]

_SLOT: Final = re.compile(r"\{\{(~?)([a-z0-9_]+)(?::([a-z0-9_]+))?\}\}")
_ALNUM: Final = string.ascii_letters + string.digits
_HEX: Final = "0123456789abcdef"


@dataclass(frozen=True, slots=True)
class Planted:
    kind: str
    start: int
    end: int
    value: str


@dataclass(frozen=True, slots=True)
class Sample:
    genre: str
    text: str
    planted: tuple[Planted, ...]
    near_misses: tuple[str, ...]


class _Values:
    """Generators of planted values (one method per kind) and of near-misses (``near_*``)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    # -- helpers -------------------------------------------------------------------------------

    def chars(self, alphabet: str, size: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(size))

    def mixed(self, alphabet: str, size: int) -> str:
        """Random, with at least one lower case letter, one capital and one digit."""
        while True:
            value = self.chars(alphabet, size)
            classes = (str.islower, str.isupper, str.isdigit)
            if all(any(test(c) for c in value) for test in classes):
                return value

    def digits(self, size: int) -> str:
        return self.chars(string.digits, size)

    def b64(self, size: int, *, url: bool = False) -> str:
        raw = self.rng.randbytes(size)
        return (base64.urlsafe_b64encode(raw) if url else base64.b64encode(raw)).decode()

    def name(self) -> str:
        return self.rng.choice(
            ["wei.zhang", "li.na", "john.smith", "maria.garcia", "chen_jie", "a.kowalski",
             "yuki.tanaka", "omar.haddad", "sarah.o-connor", "liu.yang88", "p.dubois"]
        )  # fmt: skip

    # -- secrets -------------------------------------------------------------------------------

    def aws_access_key(self, _: str | None) -> str:
        return self.rng.choice(["AKIA", "ASIA"]) + self.chars(string.ascii_uppercase + "234567", 16)

    def aws_secret_key(self, _: str | None) -> str:
        return self.mixed(_ALNUM + "/+", 40)

    def gcp_api_key(self, _: str | None) -> str:
        return "AIza" + self.mixed(_ALNUM + "_-", 35)

    def private_key(self, variant: str | None) -> str:
        label = self.rng.choice(["RSA ", "EC ", "OPENSSH ", ""])
        body = [self.b64(48) for _ in range(self.rng.randint(4, 9))] + [self.b64(21)]
        newline = "\\n" if variant == "escaped" else "\n"
        lines = [f"-----BEGIN {label}PRIVATE KEY-----", *body, f"-----END {label}PRIVATE KEY-----"]
        return newline.join(lines)

    def azure_storage_key(self, _: str | None) -> str:
        return self.b64(64)

    def azure_sas_signature(self, _: str | None) -> str:
        return self.b64(32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")

    def openai_key(self, variant: str | None) -> str:
        if variant == "legacy" or self.rng.random() < 0.3:
            return f"sk-{self.mixed(_ALNUM, 20)}T3BlbkFJ{self.mixed(_ALNUM, 20)}"
        return "sk-proj-" + self.mixed(_ALNUM + "-_", self.rng.choice([48, 74, 156]))

    def anthropic_key(self, _: str | None) -> str:
        return "sk-ant-api03-" + self.mixed(_ALNUM + "-_", 93) + "AA"

    def github_token(self, _: str | None) -> str:
        if self.rng.random() < 0.3:
            return f"github_pat_{self.mixed(_ALNUM, 22)}_{self.mixed(_ALNUM, 59)}"
        return self.rng.choice(["ghp_", "gho_", "ghs_"]) + self.mixed(_ALNUM, 36)

    def slack_token(self, _: str | None) -> str:
        prefix = self.rng.choice(["xoxb", "xoxp"])
        return f"{prefix}-{self.digits(12)}-{self.digits(13)}-{self.mixed(_ALNUM, 24)}"

    def slack_webhook(self, _: str | None) -> str:
        team, hook = self.chars("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789", 10), self.mixed(_ALNUM, 24)
        return f"https://hooks.slack.com/services/T{team}/B{team[::-1]}/{hook}"

    def stripe_key(self, variant: str | None) -> str:
        if variant == "webhook":
            return "whsec_" + self.mixed(_ALNUM, 32)
        prefix = self.rng.choice(["sk_live_", "rk_live_", "sk_test_"])
        return prefix + self.mixed(_ALNUM, self.rng.choice([24, 99]))

    def huggingface_token(self, _: str | None) -> str:
        return "hf_" + self.mixed(string.ascii_letters + "0123456789", 34)

    def jwt(self, _: str | None) -> str:
        header = {"alg": self.rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
        claims = {"sub": self.digits(8), "name": self.name(), "iat": 1715766000}
        segments = [
            base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")
            for part in (header, claims)
        ]
        return ".".join([*segments, self.b64(32, url=True).rstrip("=")])

    def password(self, _: str | None) -> str:
        return self.rng.choice(string.ascii_letters) + self.mixed(_ALNUM + "!*-._~", 11)

    url_password = password

    def basic_auth(self, _: str | None) -> str:
        return base64.b64encode(f"deploy:{self.password(None)}".encode()).decode()

    def bearer_token(self, _: str | None) -> str:
        return self.mixed(_ALNUM, 40)

    def generic_secret(self, _: str | None) -> str:
        if self.rng.random() < 0.5:
            return self.chars(_HEX, 32)
        return self.mixed(_ALNUM, 40)

    # -- personal data ---------------------------------------------------------------------------

    def email(self, variant: str | None) -> str:
        if variant == "gcp":
            return f"deployer@acme-prod-{self.digits(6)}.iam.gserviceaccount.com"
        domain = self.rng.choice(
            ["qq.com", "163.com", "gmail.com", "mailbox.org", "corp-mail.net", "uni-heidelberg.de",
             "acme.com.cn", "example.co.uk", "startup.io", "outlook.com"]
        )  # fmt: skip
        return f"{self.name()}{self.rng.choice(['', self.digits(2)])}@{domain}"

    def phone(self, variant: str | None) -> str:
        choice = variant or self.rng.choice(["cn", "us", "intl", "landline"])
        if choice == "cn":
            number = self.rng.choice("3456789") + self.digits(9)
            forms = [f"1{number}", f"1{number[:2]} {number[2:6]} {number[6:]}",
                     f"+86 1{number}", f"+86-1{number[:2]}-{number[2:6]}-{number[6:]}"]  # fmt: skip
            return self.rng.choice(forms)
        if choice == "us":
            area, line = self.rng.choice(["415", "212", "646", "312"]), f"01{self.digits(2)}"
            return self.rng.choice(
                [f"({area}) 555-{line}", f"{area}-555-{line}", f"+1 {area} 555 {line}"]
            )
        if choice == "intl":
            return self.rng.choice([f"+44 20 7946 0{self.digits(3)}", f"+49 30 {self.digits(8)}"])
        return self.rng.choice([f"010-6{self.digits(7)}", f"0755-8{self.digits(7)}"])

    def payment_card(self, variant: str | None) -> str:
        prefix, size = self.rng.choice(
            [("4", 16), ("51", 16), ("55", 16), ("37", 15), ("6011", 16), ("62", 16), ("3530", 16)]
        )
        digits = prefix + self.digits(size - len(prefix) - 1)
        digits += _luhn_digit(digits)
        style = variant or self.rng.choice(["plain", "spaced", "dashed"])
        if style == "plain":
            return digits
        separator = " " if style == "spaced" else "-"
        if size == 15:
            return separator.join([digits[:4], digits[4:10], digits[10:]])
        return separator.join(digits[i : i + 4] for i in range(0, 16, 4))

    def iban(self, variant: str | None) -> str:
        country, bban = self.rng.choice(
            [("DE", self.digits(18)), ("GB", "NWBK" + self.digits(14)), ("FR", self.digits(23)),
             ("NL", "ABNA" + self.digits(10)), ("ES", self.digits(20))]
        )  # fmt: skip
        compact = _iban(country, bban)
        if variant == "compact" or self.rng.random() < 0.4:
            return compact
        return " ".join(compact[i : i + 4] for i in range(0, len(compact), 4))

    def cn_resident_id(self, _: str | None) -> str:
        region = self.rng.choice(["110105", "310115", "440305", "330106", "510107", "320102"])
        birth = f"{self.rng.randint(1950, 2005)}{self.rng.randint(1, 12):02d}"
        body = f"{region}{birth}{self.rng.randint(1, 28):02d}{self.digits(3)}"
        return body + _cn_check(body)

    def ip_address(self, variant: str | None) -> str:
        if variant == "v6" or (variant is None and self.rng.random() < 0.3):
            groups = [self.chars(_HEX, self.rng.randint(1, 4)) for _ in range(4)]
            return self.rng.choice(["2001:db8:", "2a01:4f8:"]) + ":".join(groups) + "::1"
        first = self.rng.choice([8, 23, 45, 52, 93, 104, 151, 185, 203, 10, 172, 192])
        return ".".join(str(n) for n in (first, *(self.rng.randint(1, 254) for _ in range(3))))

    # -- near-misses -----------------------------------------------------------------------------

    def near_card(self) -> str:
        card = self.payment_card("plain")
        return card[:-1] + str((int(card[-1]) + 1) % 10)

    def near_luhn_valid_not_card(self) -> str:
        digits = "1" + self.digits(14)
        return digits + _luhn_digit(digits)

    def near_id17(self) -> str:
        return self.cn_resident_id(None)[:17]

    def near_id_bad(self) -> str:
        value = self.cn_resident_id(None)
        wrong = "10X98765432".replace(value[-1], "")
        return value[:-1] + self.rng.choice(wrong)

    def near_iban_bad(self) -> str:
        value = self.iban("compact")
        return value[:2] + f"{(int(value[2:4]) + 1) % 100:02d}" + value[4:]

    def near_version(self) -> str:
        quad = ".".join(str(self.rng.randint(0, 20)) for _ in range(4))
        return self.rng.choice(
            [f"version {quad}", f"v{quad}", f"Chrome/{quad}", f"pkg=={quad}", f"版本 {quad}"]
        )

    def near_uuid(self) -> str:
        hexes = self.chars(_HEX, 32)
        return "-".join([hexes[:8], hexes[8:12], "4" + hexes[13:16], hexes[16:20], hexes[20:]])

    def near_git_sha(self) -> str:
        return self.chars(_HEX, self.rng.choice([40, 7, 12]))

    def near_sha256(self) -> str:
        return "sha256:" + self.chars(_HEX, 64)

    def near_not_jwt(self) -> str:
        parts = [{"typ": "JWT"}, {"offset": self.rng.randint(1, 900), "limit": 50}]
        encoded = [
            base64.urlsafe_b64encode(json.dumps(p).encode()).decode().rstrip("=") for p in parts
        ]
        return ".".join([*encoded, self.chars(_HEX, 16)])

    def near_cursor(self) -> str:
        return base64.b64encode(json.dumps({"page": self.rng.randint(2, 99)}).encode()).decode()

    def near_order(self) -> str:
        date = f"2024{self.rng.randint(1, 12):02d}{self.rng.randint(1, 28):02d}"
        return self.rng.choice(
            [f"{date}{self.digits(10)}", f"ORD-{date}-{self.digits(6)}", f"#{self.digits(9)}",
             f"123-456-{self.digits(4)}", f"INV-2024-{self.digits(6)}"]
        )  # fmt: skip

    def near_timestamp(self) -> str:
        return self.rng.choice([f"17157{self.digits(8)}", f"17157{self.digits(5)}"])

    def near_mac(self) -> str:
        return ":".join(self.chars(_HEX, 2) for _ in range(6))

    def near_fixed(self, options: list[str]) -> str:
        return self.rng.choice(options)

    def near_code(self) -> str:
        return self.near_fixed(
            ["@app.route('/login')", "@pytest.fixture", "@dataclass(frozen=True)", "x = a@b.T",
             "out = weights@np.transpose(x)", "std::vector<int>", "Foo::bar()", "a::b",
             "hf_hub_download(repo_id)", "import sklearn  # sk-learn style estimators"]
        )  # fmt: skip

    def near_placeholder(self) -> str:
        return self.near_fixed(
            ["password: ********", "DB_PASSWORD=${DB_PASSWORD}",
             'api_key = os.environ["OPENAI_API_KEY"]', "token: ${{ secrets.GITHUB_TOKEN }}",
             "secret: my-secret-name", "password=<your-password>", "PWD=/home/dev/project",
             "token_count = 12345", "api_key=settings.OPENAI_API_KEY", "passwd: null",
             "the password: reset it from the console", "密码是什么？", "pwd = os.getcwd()",
             "self.user, self.password = user, password", "(using password: YES)",
             "password:  The password for the account.", "passwd = acct = ''"]
        )  # fmt: skip

    def near_address(self) -> str:
        return self.near_fixed(
            ["git@github.com:acme/infra.git", "root@localhost", "admin@server",
             "https://user@git.internal/acme/app", "http://localhost:8080/api/v1",
             "1.3.6.1.4.1.2021", "2024-05-15 12:30:45", "ISBN 978-0-306-40615-7",
             "sk-ant prefix", "ghp_ prefix", "tokens start with sk-proj-", "3.14159265358979",
             "Decimal('+35236450.6')", "[0-9a-f]{32}", "user@example"]
        )  # fmt: skip


def _luhn_digit(payload: str) -> str:
    total = 0
    for position, char in enumerate(reversed(payload)):
        digit = int(char)
        if position % 2 == 0:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return str(-total % 10)


def _iban(country: str, bban: str) -> str:
    number = int("".join(str(int(char, 36)) for char in bban + country + "00"))
    return f"{country}{98 - number % 97:02d}{bban}"


def _cn_check(body: str) -> str:
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    return "10X98765432"[sum(int(c) * w for c, w in zip(body, weights, strict=True)) % 11]


KINDS: Final = (
    "private_key", "jwt", "aws_access_key", "aws_secret_key", "gcp_api_key", "anthropic_key",
    "openai_key", "github_token", "slack_webhook", "slack_token", "stripe_key",
    "huggingface_token", "azure_storage_key", "azure_sas_signature", "url_password",
    "basic_auth", "bearer_token", "password", "generic_secret", "email", "cn_resident_id",
    "iban", "payment_card", "phone", "ip_address",
)  # fmt: skip

_TEMPLATES: Final[dict[str, tuple[str, ...]]] = {
    "chat_en": (
        "Hi! I'm stuck on the deploy. You can reach me at {{email}} or {{phone:us}}; "
        "the server is {{ip_address}} and we're on {{~version}}.",
        "Here is my OpenAI key so you can reproduce it: {{openai_key}}. Please don't "
        "share it. Also note {{~address}} in the docs.",
        "Can you charge my card {{payment_card}} (exp 09/27)? The last attempt with "
        "{{~card}} was declined, order {{~order}}.",
        "My IBAN is {{iban}} for the refund. The reference was {{~iban_bad}}, which "
        "the bank said is invalid.",
        "Rotating keys: the old GitHub token {{github_token}} is revoked, commit "
        "{{~git_sha}} removed it from the repo. Also {{~code}} still fails.",
        "Why does this fail?\n```python\nclient = anthropic.Anthropic(api_key="
        '"{{anthropic_key}}")\n{{~code}}\n```\nrequest id {{~uuid}}',
        "Our staging DB: postgres://app:{{url_password}}@db-staging.internal:5432/app "
        "(timestamp {{~timestamp}}). Ping {{email}} if it is down.",
        "I pasted the service token by mistake: Bearer {{bearer_token}}. Tracking "
        "number {{~luhn_valid_not_card}}, build {{~version}}.",
        "The webhook is {{slack_webhook}} and the bot uses {{slack_token}}; "
        "{{~placeholder}} is how the template reads it.",
        "Login to the HF hub with {{huggingface_token}}, then run {{~code}}. "
        "Cursor for the next page: {{~cursor}}",
        "Call me on {{phone:intl}} tomorrow. The MAC of the box is {{~mac}} and its "
        "address {{ip_address:v6}}.",
        "Session cookie: {{jwt}} -- but the pagination token {{~not_jwt}} is "
        "fine to log. Image digest {{~sha256}}.",
    ),
    "chat_zh": (
        "你好，我的邮箱是{{email}}，手机{{phone:cn}}，有问题随时联系我。版本号 {{~version}}",
        "客户张伟，身份证号{{cn_resident_id}}，银行卡号{{payment_card}}，请核实。"
        "上次填写的{{~id_bad}}校验不通过。",
        "服务器 {{ip_address}} 上的数据库密码是 {{password}}，别外传。订单号 {{~order}} 已发货。",
        "这是我的 GitHub token：{{github_token}}，用完就删。提交 {{~git_sha}} 已经回滚。",
        "请把退款打到 IBAN {{iban}}。之前那个 {{~iban_bad}} 是错的。",
        "把 API key {{openai_key}} 配到环境变量里，不要写死在代码里。{{~placeholder}}",
        "联系电话：{{phone:landline}}，备用手机 {{phone:cn}}。工号 {{~id17}}。",
        "登录令牌：{{generic_secret}}，有效期一天。{{~placeholder}}",
        "帮我看看这个报错，用户 {{email}} 登录时 token 过期了：{{jwt}}",
    ),
    "env": (
        "$ env\nSHELL=/bin/bash\nPWD=/home/dev/project\nHOME=/home/dev\n"
        "OPENAI_API_KEY={{openai_key}}\nAWS_ACCESS_KEY_ID={{aws_access_key}}\n"
        "AWS_SECRET_ACCESS_KEY={{aws_secret_key}}\nGIT_COMMIT={{~git_sha}}\nBUILD_ID={{~uuid}}",
        "$ printenv | sort\nANTHROPIC_API_KEY={{anthropic_key}}\nDATABASE_URL=mysql://root:"
        "{{url_password}}@{{ip_address:v4}}:3306/shop\nGITHUB_TOKEN={{github_token}}\nHF_TOKEN="
        "{{huggingface_token}}\nLANG=en_US.UTF-8\n{{~placeholder}}",
        "# .env\nSTRIPE_SECRET_KEY={{stripe_key}}\nSTRIPE_WEBHOOK_SECRET={{stripe_key:webhook}}"
        "\nDB_PASSWORD={{password}}\nSECRET_KEY={{generic_secret}}\nGOOGLE_API_KEY={{gcp_api_key}}"
        "\n{{~placeholder}}",
        'declare -x PGPASSWORD="{{password}}"\ndeclare -x REFRESH_TOKEN="{{generic_secret}}"'
        '\ndeclare -x SLACK_BOT_TOKEN="{{slack_token}}"\ndeclare -x VERSION="{{~version}}"',
    ),
    "trace": (
        'Traceback (most recent call last):\n  File "/srv/app/db.py", line 42, in connect\n'
        '    conn = psycopg.connect("host=db.internal user=app password={{password}} dbname=prod")'
        '\npsycopg.OperationalError: connection to server at "{{ip_address}}", port 5432 failed: '
        'FATAL:  password authentication failed for user "app"',
        'Exception in thread "main" java.sql.SQLException: Access denied for user '
        "'shop'@'{{ip_address}}' (using password: YES)\n\tat com.mysql.cj.jdbc.ConnectionImpl"
        ".connect(ConnectionImpl.java:828)\n\tjdbc:mysql://shop:{{url_password}}@db:3306/shop",
        "botocore.exceptions.ClientError: An error occurred (InvalidClientTokenId) when "
        "calling the GetCallerIdentity operation: The security token included in the request is "
        "invalid. key={{aws_access_key}} request={{~uuid}}",
        "stripe.error.AuthenticationError: Invalid API Key provided: {{stripe_key}}\n  at "
        "charge (payments.py:77) customer={{email}} card={{~card}}",
    ),
    "config": (
        "database:\n  host: {{ip_address}}\n  port: 5432\n  user: app\n  password: "
        '"{{password}}"\nstripe:\n  secret_key: {{stripe_key}}\nslack:\n  webhook_url: '
        "{{slack_webhook}}\n  bot_token: {{slack_token}}\n# {{~placeholder}}",
        '{\n  "ConnectionStrings": {\n    "Storage": "DefaultEndpointsProtocol=https;'
        'AccountName=acmeprod;AccountKey={{azure_storage_key}};EndpointSuffix=core.windows.net",\n'
        '    "Sql": "Server=tcp:acme.database.windows.net,1433;Initial Catalog=prod;'
        'User ID=acme;Password={{password}};Encrypt=True;"\n  }\n}',
        '{\n  "type": "service_account",\n  "project_id": "acme-prod",\n'
        '  "private_key_id": "{{~git_sha}}",\n  "private_key": "{{private_key:escaped}}\\n",\n'
        '  "client_email": "{{email:gcp}}",\n  "client_id": "{{~order}}"\n}',
        "[default]\naws_access_key_id = {{aws_access_key}}\naws_secret_access_key = "
        "{{aws_secret_key}}\nregion = eu-west-1\n; {{~placeholder}}",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: api\nstringData:\n  api_key: "
        '"{{generic_secret}}"\n  client_secret: {{generic_secret}}\n  image: app@{{~sha256}}',
        "Here is the deploy key, please rotate it:\n{{private_key}}\nfingerprint {{~sha256}}",
        "[client]\nuser = backup\npassword = {{password}}\nhost = {{ip_address}}\n"
        "# release {{~version}}, see {{~address}}",
    ),
    "curl": (
        'curl -X POST https://api.openai.com/v1/chat/completions \\\n  -H "Authorization: '
        'Bearer {{openai_key}}" \\\n  -H "Content-Type: application/json" \\\n  -d \'{"model": '
        '"gpt-4o", "user": "{{~uuid}}"}\'',
        'curl -s -H "Authorization: Basic {{basic_auth}}" https://registry.internal/v2/'
        "_catalog  # {{~address}}",
        'curl "https://acme.blob.core.windows.net/backups/db.tar?sv=2022-11-02&ss=b&sp=r&'
        'se=2024-06-01T00:00:00Z&spr=https&sig={{azure_sas_signature}}" -o db.tar',
        "curl -H 'x-api-key: {{generic_secret}}' -H 'anthropic-version: 2023-06-01' "
        "https://api.anthropic.com/v1/messages  # {{~code}}",
        'curl -H "Authorization: Bearer {{jwt}}" https://{{ip_address:v4}}:8443/api/me',
        "curl -u deploy:{{password}} https://ci.internal/job/build/api/json  # {{~placeholder}}",
        "curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"deployed "
        "{{~version}}\"}' {{slack_webhook}}",
    ),
    "log": (
        "2024-05-15T12:30:45.123Z INFO [req {{~uuid}}] POST /api/login from {{ip_address}} "
        "user={{email}} status=200 duration=35ms",
        "2024-05-15 12:30:46,001 WARN auth: token refresh failed for {{email}}: "
        "Bearer {{jwt}} expired (order {{~order}})",
        "May 15 12:31:02 gw sshd[2211]: Accepted publickey for deploy from {{ip_address:v6}} "
        "port 51514 ssh2: ED25519 SHA256:{{~git_sha}}",
        "[2024-05-15 12:32:00] payment.failed customer_phone={{phone}} card={{payment_card}}"
        " retry_card={{~card}} ts={{~timestamp}}",
        "2024/05/15 12:33:10 [error] upstream auth failed, token={{generic_secret}}, "
        "client: {{ip_address}}, {{~placeholder}}",
        "INFO  用户 {{phone:cn}} 提交实名认证，身份证 {{cn_resident_id}}，IP {{ip_address}}，"
        "错误证件 {{~id17}}",
    ),
    "tool_json": (
        '{"results": [{"name": "{{~uuid}}", "owner": "{{email}}", "notes":'
        ' "line one\\nkey: {{github_token}}\\ncontact {{phone:cn}}"}], "next": "{{~cursor}}"}',
        '{"user": {"id": "{{~uuid}}", "email": "{{email}}", "phone": '
        '"{{phone:us}}", "last_ip": "{{ip_address}}", "agent": "Mozilla/5.0 '
        '{{~version}}"}, "password": "{{password}}"}',
        '{"config": {"api_key": "{{generic_secret}}", "endpoint": '
        '"http://[{{ip_address:v6}}]:8080/v1", "commit": "{{~git_sha}}"}}',
    ),
}


def _fill(template: str, values: _Values) -> tuple[str, tuple[Planted, ...], tuple[str, ...]]:
    pieces: list[str] = []
    planted: list[Planted] = []
    near: list[str] = []
    cursor = length = 0
    for slot in _SLOT.finditer(template):
        literal = template[cursor : slot.start()]
        pieces.append(literal)
        length += len(literal)
        negative, name, variant = slot.groups()
        if negative:
            value = getattr(values, f"near_{name}")()
            near.append(value)
        else:
            value = getattr(values, name)(variant)
            planted.append(Planted(name, length, length + len(value), value))
        pieces.append(value)
        length += len(value)
        cursor = slot.end()
    pieces.append(template[cursor:])
    return "".join(pieces), tuple(planted), tuple(near)


def build_corpus(seed: int = 20240515, *, size: int = 600) -> list[Sample]:
    """``size`` samples, cycling through every template with fresh values each time."""
    values = _Values(random.Random(seed))
    samples = []
    templates = [(genre, text) for genre, texts in _TEMPLATES.items() for text in texts]
    for index in range(size):
        genre, template = templates[index % len(templates)]
        text, planted, near = _fill(template, values)
        samples.append(Sample(genre, text, planted, near))
    return samples


# ---------------------------------------------------------------------------------------------
# Scoring


@dataclass(frozen=True, slots=True)
class Score:
    """Counts for one kind: planted values caught (by a finding of that kind), found, missed."""

    planted: int = 0
    caught: int = 0
    findings: int = 0
    correct: int = 0

    @property
    def recall(self) -> float:
        return self.caught / self.planted if self.planted else 1.0

    @property
    def precision(self) -> float:
        return self.correct / self.findings if self.findings else 1.0


@dataclass(frozen=True, slots=True)
class Report:
    by_kind: dict[str, Score]
    overall: Score
    near_misses: int
    near_misses_hit: tuple[str, ...]
    leaked: tuple[str, ...]


def _covers(span: tuple[int, int], planted: Planted) -> bool:
    return span[0] <= planted.start and planted.end <= span[1]


def _overlaps(span: tuple[int, int], other: tuple[int, int]) -> bool:
    return span[0] < other[1] and other[0] < span[1]


def score(samples: list[Sample], redactor: Redactor) -> Report:
    """Per-kind and overall precision/recall of ``redactor`` on the corpus.

    A planted value counts as caught when a finding of its own kind covers all of it; a
    finding counts as correct when it overlaps a planted value of its kind. A near-miss is hit
    when any finding overlaps it; a planted value leaks when it is still in the output.
    """
    counts: dict[str, list[int]] = {kind: [0, 0, 0, 0] for kind in KINDS}
    hit: list[str] = []
    leaked: list[str] = []
    near_total = 0
    for sample in samples:
        result = redactor.redact_text(sample.text)
        spans = [(f.kind, (f.start, f.end)) for f in result.findings]
        for planted in sample.planted:
            counts[planted.kind][0] += 1
            counts[planted.kind][1] += any(
                kind == planted.kind and _covers(span, planted) for kind, span in spans
            )
            if planted.value in result.text:
                leaked.append(planted.value)
        for kind, span in spans:
            row = counts.setdefault(kind, [0, 0, 0, 0])
            row[2] += 1
            row[3] += any(
                p.kind == kind and _overlaps(span, (p.start, p.end)) for p in sample.planted
            )
        near_total += len(sample.near_misses)
        hit.extend(_near_misses_hit(sample, [span for _, span in spans]))
    by_kind = {kind: Score(*row) for kind, row in counts.items()}
    overall = Score(*(sum(row[i] for row in counts.values()) for i in range(4)))
    return Report(by_kind, overall, near_total, tuple(hit), tuple(leaked))


def _near_misses_hit(sample: Sample, spans: list[tuple[int, int]]) -> list[str]:
    hit = []
    cursor = 0
    for near in sample.near_misses:
        start = sample.text.index(near, cursor)
        cursor = start + len(near)
        if any(_overlaps(span, (start, cursor)) for span in spans):
            hit.append(near)
    return hit


#: The context a value needs to be read as its kind when it stands alone.
_CONTEXT: Final = {
    "password": "password={}",
    "url_password": "postgres://app:{}@db-staging:5432/app",
    "basic_auth": "Authorization: Basic {}",
    "bearer_token": "Authorization: Bearer {}",
    "generic_secret": "SECRET_KEY={}",
    "aws_secret_key": "AWS_SECRET_ACCESS_KEY={}",
    "azure_storage_key": "AccountName=acme;AccountKey={};EndpointSuffix=core.windows.net",
    "azure_sas_signature": "https://acme.blob.core.windows.net/db.tar?sv=2022&sig={}",
}


def lone_value(kind: str, seed: int = 7) -> str:
    """One planted value of ``kind`` in the least context that makes it that kind."""
    value = getattr(_Values(random.Random(seed)), kind)(None)
    return _CONTEXT.get(kind, "{}").format(value)
