//! The admin panel in a real browser: headless Chromium driven through WebDriver
//! (Debian's `chromium` and `chromium-driver`, which scripts/test installs), against the
//! real server on both backends. Every browser step also checks that the page loaded
//! nothing from another host and logged no console error, and saves a screenshot under
//! `target/admin-screenshots/`.

// The browser tests are their own binary: they install the process-wide log capture
// for their log test, and need Chromium, which the API tests do not.
#[path = "api/common/mod.rs"]
mod common;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use common::*;
use fantoccini::{Client, ClientBuilder, Locator, wd::WebDriverCompatibleCommand};
use reqwest::{Method, StatusCode, Url, header};
use serde_json::{Value, json};

on_both_backends!(
    operator_signs_in_switches_memory_and_looks_after_a_person,
    dead_job_is_retried_from_the_panel,
    a_dead_delivery_is_redelivered_and_a_facts_history_read_in_the_panel,
    read_only_operator_sees_no_change_buttons_and_forged_posts_are_refused,
    forms_without_the_session_csrf_token_are_refused,
    the_panel_answers_the_fact_cap_and_searches_as_the_api_does,
    the_panel_finds_facts_by_meaning_as_the_api_does,
    the_panel_shows_what_the_model_cost_per_job_and_per_agent_and_the_budget,
    the_facts_page_quotes_the_words_each_fact_came_from,
    the_panel_sets_whose_facts_an_agent_reads,
    a_panel_form_holding_nul_is_refused_and_stores_nothing,
);

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

// ---------------------------------------------------------------------------------------
// The browser harness.

/// A chromedriver child process and a WebDriver session in a fresh Chromium profile;
/// on drop (a failed test) both are ended, by their process ids.
struct Browser {
    client: Option<Client>,
    driver: Child,
    profile: PathBuf,
    base: String,
    label: String,
    killed: bool,
}

impl Browser {
    async fn start(app: &TestApp, backend: Backend, test: &str) -> Browser {
        for binary in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(binary).exists(),
                "{binary} is missing: run scripts/test, which installs Debian's chromium and chromium-driver"
            );
        }
        let port = free_port();
        let mut command = Command::new(CHROMEDRIVER);
        command.arg(format!("--port={port}")).stdout(Stdio::null()).stderr(Stdio::null());
        let driver = command.spawn().expect("start chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let up = eventually(Duration::from_secs(20), || async {
            let ready = http.get(format!("{url}/status")).send().await.ok()?.json::<Value>().await.ok()?;
            (ready["value"]["ready"] == true).then_some(())
        })
        .await;
        let profile = std::env::temp_dir().join(format!("engram-chromium-{}", uuid::Uuid::now_v7().simple()));
        let label = format!("{}-{test}", if backend == Backend::Sqlite { "sqlite" } else { "postgres" });
        let mut browser = Browser { client: None, driver, profile, base: app.base.clone(), label, killed: false };
        assert!(up.is_some(), "chromedriver did not start");
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities(&browser.profile))
            .connect(&url)
            .await
            .expect("a WebDriver session with headless Chromium");
        browser.client = Some(client);
        browser
    }

    /// The WebDriver session (there until [`Browser::close`]).
    fn client(&self) -> &Client {
        self.client.as_ref().expect("an open session")
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Runs `script` in the page with `args` (as `arguments[i]`) and returns its value.
    async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client().execute(script, args).await.expect("script runs")
    }

    async fn goto(&self, path: &str) {
        self.client().goto(&self.url(path)).await.expect("navigate");
    }

    async fn path(&self) -> String {
        let url = self.client().current_url().await.expect("current url");
        match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        }
    }

    async fn find(&self, css: &str) -> fantoccini::elements::Element {
        match self.client().wait().at_most(Duration::from_secs(10)).for_element(Locator::Css(css)).await {
            Ok(element) => element,
            Err(e) => {
                let page = self.client().source().await.unwrap_or_default();
                panic!("no element {css} on {}: {e}\n{page}", self.path().await)
            }
        }
    }

    async fn count(&self, css: &str) -> usize {
        self.client().find_all(Locator::Css(css)).await.expect("find all").len()
    }

    async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.expect("text")
    }

    /// Clicks a link or a submit button and waits (10 s at most) until the page it leads
    /// to has loaded: the click itself returns before the next page is there, and reading
    /// that page too early finds the old one, or an element the navigation then removes.
    async fn click(&self, css: &str) {
        self.js("window.engramPageBeforeClick = true;", vec![]).await;
        self.toggle(css).await;
        self.wait_for_the_next_page(css).await;
    }

    /// As [`Browser::click`], for a button that asks "are you sure?" first: accepts.
    async fn click_and_confirm(&self, css: &str) {
        self.js("window.engramPageBeforeClick = true;", vec![]).await;
        self.toggle(css).await;
        self.client().accept_alert().await.expect("the confirmation dialog");
        self.wait_for_the_next_page(css).await;
    }

    async fn wait_for_the_next_page(&self, clicked: &str) {
        let loaded = "return window.engramPageBeforeClick === undefined && document.readyState === 'complete';";
        for _ in 0..100 {
            // While the page is being replaced the script may fail: not loaded yet.
            if let Ok(Value::Bool(true)) = self.client().execute(loaded, vec![]).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("clicking {clicked} on {} led to no new page", self.path().await);
    }

    /// Clicks something that changes the page in place (a `<summary>`, a checkbox).
    async fn toggle(&self, css: &str) {
        self.retrying_stale(css, |element| async move { element.click().await }).await;
    }

    async fn type_into(&self, css: &str, text: &str) {
        self.retrying_stale(css, |element| async move {
            element.clear().await?;
            element.send_keys(text).await
        })
        .await;
    }

    /// Runs `act` on the element `css`, finding it again when the page it was found on
    /// was replaced meanwhile (the previous step's navigation finishing late): the
    /// browser then answers "stale element reference" rather than acting.
    async fn retrying_stale<F, Fut>(&self, css: &str, act: F)
    where
        F: Fn(fantoccini::elements::Element) -> Fut,
        Fut: std::future::Future<Output = Result<(), fantoccini::error::CmdError>>,
    {
        for _ in 0..20 {
            match act(self.find(css).await).await {
                Ok(()) => return,
                Err(fantoccini::error::CmdError::Standard(e))
                    if e.error == fantoccini::error::ErrorStatus::StaleElementReference =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{css}: {e}"),
            }
        }
        panic!("{css} kept going stale");
    }

    /// Checks what every page must satisfy, then saves a screenshot of it.
    async fn step(&self, name: &str) {
        self.assert_nothing_left_the_host().await;
        self.assert_no_console_error().await;
        let png = self.client().screenshot().await.expect("screenshot");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/admin-screenshots");
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        std::fs::write(dir.join(format!("{}-{name}.png", self.label)), png).expect("save screenshot");
    }

    /// Every request of the page (the document and its resources) went to the server.
    async fn assert_nothing_left_the_host(&self) {
        let names = self
            .js(
                "return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))\
                 .map(function (e) { return e.name; });",
                vec![],
            )
            .await;
        let names = names.as_array().cloned().unwrap_or_default();
        assert!(!names.is_empty(), "no performance entries");
        for name in names {
            let name = name.as_str().unwrap_or_default();
            assert!(name.starts_with(&format!("{}/", self.base)), "a request left the host: {name}");
        }
    }

    /// The browser's console (read through chromedriver's log endpoint, which drains
    /// it) holds no error: no failed load, no CSP violation, no script error.
    async fn assert_no_console_error(&self) {
        let entries = self.console().await;
        let errors: Vec<&Value> = entries.iter().filter(|e| e["level"] == "SEVERE").collect();
        assert!(errors.is_empty(), "console errors: {errors:?}");
    }

    /// After a deliberately refused post: the console holds that refusal (the browser
    /// logs any 4xx document) and nothing else.
    async fn expect_console_only_the_refusal(&self, status: u16) {
        let entries = self.console().await;
        let errors: Vec<&Value> = entries.iter().filter(|e| e["level"] == "SEVERE").collect();
        assert_eq!(errors.len(), 1, "console errors: {errors:?}");
        let message = errors[0]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("status of {status}")), "console: {message}");
    }

    async fn console(&self) -> Vec<Value> {
        let log = self.client().issue_cmd(BrowserLog).await.expect("browser log");
        log.as_array().cloned().unwrap_or_default()
    }

    async fn sign_in(&self, token: &str) {
        self.goto("/admin").await;
        assert_eq!(self.path().await, "/admin/sign-in", "signed out, the panel asks to sign in");
        self.type_into("#token", token).await;
        self.click("#sign-in button[type=submit]").await;
        self.find("#tenant").await;
        assert_eq!(self.path().await, "/admin");
    }

    async fn close(mut self) {
        if let Some(client) = self.client.take() {
            client.close().await.expect("close the browser");
        }
        self.kill();
    }

    fn kill(&mut self) {
        if self.killed {
            return;
        }
        self.killed = true;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // The browser's own processes, found by the profile directory only it uses, and
        // ended by their ids.
        let marker = format!("--user-data-dir={}", self.profile.display());
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if pid > 1 && cmdline.split(|b| *b == 0).any(|arg| arg == marker.as_bytes()) {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.kill();
    }
}

fn capabilities(profile: &Path) -> serde_json::Map<String, Value> {
    let caps = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--disable-crash-reporter", "--disable-breakpad",
                "--window-size=1280,1000",
                format!("--user-data-dir={}", profile.display()),
            ],
        },
        "goog:loggingPrefs": {"browser": "ALL"},
    });
    caps.as_object().cloned().unwrap_or_default()
}

/// chromedriver's `POST /session/{id}/se/log` (the browser console since the last read).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base_url: &Url, session_id: Option<&str>) -> Result<Url, url_error::ParseError> {
        base_url.join(&format!("session/{}/se/log", session_id.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &Url) -> (Method, Option<String>) {
        (Method::POST, Some(json!({"type": "browser"}).to_string()))
    }
}

mod url_error {
    /// `url::ParseError`, named through reqwest's re-export of `url::Url`.
    pub type ParseError = <reqwest::Url as std::str::FromStr>::Err;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port()
}

// ---------------------------------------------------------------------------------------
// HTTP helpers (outside the browser).

/// Form bodies for reqwest (its `form` feature is not needed elsewhere).
trait FormBody {
    fn form_body(self, fields: &[(&str, &str)]) -> Self;
}

impl FormBody for reqwest::RequestBuilder {
    fn form_body(self, fields: &[(&str, &str)]) -> Self {
        self.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(serde_urlencoded::to_string(fields).expect("form body"))
    }
}

/// A client that shows redirects instead of following them.
fn raw_client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client")
}

/// Posts the sign-in form with `token` and the extra `headers`; redirects are not followed.
async fn post_sign_in(app: &TestApp, token: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = raw_client().post(format!("{}/admin/sign-in", app.base)).form_body(&[("token", token)]);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("sign in")
}

/// Signs in with `token` as a same-origin form would, and returns the session cookie.
async fn session_cookie(app: &TestApp, token: &str) -> String {
    let response = post_sign_in(app, token, &[("origin", &app.base)]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let set = response.headers().get(header::SET_COOKIE).expect("session cookie").to_str().expect("ascii");
    set.split(';').next().expect("cookie pair").to_owned()
}

/// A panel page's HTML, read with the session cookie.
async fn page_html(app: &TestApp, cookie: &str, path: &str) -> String {
    raw_client()
        .get(format!("{}{path}", app.base))
        .header(header::COOKIE, cookie)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html")
}

/// The CSRF token in a panel page's forms.
async fn csrf_of(app: &TestApp, cookie: &str, path: &str) -> String {
    let html = page_html(app, cookie, path).await;
    let start = html.find("name=\"csrf\" value=\"").expect("a form with a CSRF token") + 19;
    html[start..start + 64].to_owned()
}

/// Posts a form to the panel with the session cookie, as a same-origin page would.
async fn post_form(app: &TestApp, cookie: &str, path: &str, fields: &[(&str, &str)]) -> StatusCode {
    raw_client()
        .post(format!("{}{path}", app.base))
        .header(header::COOKIE, cookie)
        .header(header::ORIGIN, app.base.clone())
        .form_body(fields)
        .send()
        .await
        .expect("post")
        .status()
}

async fn facts_of(app: &TestApp, agent_id: &str, user: &str) -> Vec<Value> {
    let (status, page) = app.get(&format!("/api/agents/{agent_id}/users/{}/facts", enc(user)), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["items"].as_array().cloned().unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// The tests.

/// Sign in; switch memory on and see the API report it; settings with a validation
/// message next to its field; add, edit and delete a fact; switch consent off; read a
/// conversation; erase the person and see the receipt and an empty export; sign out.
async fn operator_signs_in_switches_memory_and_looks_after_a_person(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let admin = admin("acme");
    let (status, _) = app.put("/api/agents-config/support-bot", &admin, json!({"memory_enabled": false})).await;
    assert_eq!(status, StatusCode::OK);
    converse(&app, "support-bot", USER, &["Hi! My name is Alice.", "Where is my order?"]).await;
    let browser = Browser::start(&app, backend, "operator").await;

    // Sign in, and the overview.
    browser.sign_in(&admin).await;
    assert_eq!(browser.text("#tenant").await, "acme");
    assert_eq!(browser.text("#database").await, if backend == Backend::Sqlite { "sqlite" } else { "postgres" });
    assert_eq!(browser.text("#extractor").await, "builtin");
    assert_eq!(browser.text("#embedder").await, "none");
    assert!(browser.text("#readiness").await.contains("ready"));
    browser.step("overview").await;

    // Agents: switch memory on.
    browser.click("header nav a[href='/admin/agents']").await;
    browser.find("tr[data-agent='support-bot']").await;
    browser.step("agents").await;
    browser.click("tr[data-agent='support-bot'] form.switch button").await;
    assert_eq!(browser.text("#notice").await, "Memory is on for this agent.");
    let (_, config) = app.get("/api/agents-config/support-bot", &admin).await;
    assert_eq!(config["memory_enabled"], true, "{config}");

    // Settings: the API's message next to the field, then a valid save.
    browser.click("tr[data-agent='support-bot'] a").await;
    browser.type_into("#min_user_turns", "0").await;
    browser.click("#settings button[type=submit]").await;
    assert_eq!(browser.text("#min_user_turns-error").await, "min_user_turns must be 1-100, got 0");
    browser.step("agent-settings-error").await;
    browser.type_into("#min_user_turns", "2").await;
    browser.type_into("#extraction_instructions", "Only durable preferences.").await;
    browser.click("#settings button[type=submit]").await;
    assert_eq!(browser.text("#notice").await, "Settings saved.");
    let (_, config) = app.get("/api/agents-config/support-bot", &admin).await;
    assert_eq!(config["min_user_turns"], 2, "{config}");
    assert_eq!(config["memory_enabled"], true, "{config}");
    assert_eq!(config["extraction_instructions"], "Only durable preferences.", "{config}");
    browser.step("agent").await;

    // Forgetting and retention: the API's message next to its field, then a valid save.
    browser.type_into("#keep_best_facts", "100001").await;
    browser.click("#settings button[type=submit]").await;
    assert_eq!(browser.text("#keep_best_facts-error").await, "keep_best_facts must be 0 (off) to 100000, got 100001");
    let (_, unchanged) = app.get("/api/agents-config/support-bot", &admin).await;
    assert_eq!(unchanged["keep_best_facts"], 0, "{unchanged}");
    browser.type_into("#keep_best_facts", "25").await;
    browser.type_into("#delete_conversations_after_days", "90").await;
    browser.click("#settings button[type=submit]").await;
    assert_eq!(browser.text("#notice").await, "Settings saved.");
    let (_, config) = app.get("/api/agents-config/support-bot", &admin).await;
    assert_eq!(
        (config["keep_best_facts"].clone(), config["delete_conversations_after_days"].clone()),
        (json!(25), json!(90))
    );
    assert_eq!((config["forget_curated_facts"].clone(), config["min_user_turns"].clone()), (json!(false), json!(2)));
    let (_, config) = app
        .put(
            "/api/agents-config/support-bot",
            &admin,
            json!({"keep_best_facts": 0, "delete_conversations_after_days": 0}),
        )
        .await;
    assert_eq!(config["keep_best_facts"], 0, "{config}");

    // People: find the person, open the agent's facts.
    browser.click("header nav a[href='/admin/people']").await;
    browser.type_into("#ref", USER).await;
    browser.click("#find-person button").await;
    assert_eq!(browser.text("#external-ref").await, USER);
    browser.click("#person-agents a").await;
    assert_eq!(browser.text("#agent-id").await, "support-bot");

    // Add a fact (with a validation message first), edit it, delete it.
    browser.type_into("#new-fact", "Prefers tea over coffee").await;
    browser.type_into("#new-score", "1.5").await;
    browser.click("#add-fact button[type=submit]").await;
    assert_eq!(browser.text("#new-score-error").await, "score must be between 0 and 1, got 1.5");
    browser.type_into("#new-score", "0.9").await;
    browser.type_into("#new-tags", "drinks").await;
    browser.click("#add-fact button[type=submit]").await;
    assert_eq!(browser.text("#notice").await, "Fact added.");
    let facts = facts_of(&app, "support-bot", USER).await;
    assert_eq!(facts.len(), 1, "{facts:?}");
    assert_eq!(facts[0]["fact"], "Prefers tea over coffee");
    assert_eq!(facts[0]["tags"], json!(["drinks"]));
    assert_eq!(facts[0]["source"], "manual");
    let id = facts[0]["id"].as_str().expect("fact id").to_owned();
    let row = format!("tr[data-fact-id='{id}']");
    // When it was said, as the API has it (to the minute), and no end or expiry.
    let observed = chrono::DateTime::parse_from_rfc3339(facts[0]["observed_at"].as_str().expect("observed_at"))
        .expect("a time")
        .format("%Y-%m-%d %H:%M UTC")
        .to_string();
    assert_eq!(browser.text(&format!("{row} .observed")).await, observed);
    assert_eq!(
        browser.count(&format!("{row} .valid-until")).await + browser.count(&format!("{row} .expires")).await,
        0
    );
    browser.toggle(&format!("{row} summary")).await;
    browser.type_into(&format!("#fact-{id}"), "Prefers green tea").await;
    browser.click(&format!("{row} form.edit-fact button")).await;
    assert_eq!(browser.text("#notice").await, "Fact saved.");
    let facts = facts_of(&app, "support-bot", USER).await;
    assert_eq!(facts[0]["fact"], "Prefers green tea", "{facts:?}");
    browser.type_into("#new-fact", "Lives in Lyon").await;
    browser.click("#add-fact button[type=submit]").await;
    browser.type_into("#q", "tea").await;
    browser.click("#search-facts button").await;
    assert_eq!(browser.count("#facts tbody tr").await, 1);
    browser.step("facts-search").await;
    browser.goto(&format!("/admin/people/{}/agents/support-bot", enc(USER))).await;
    browser.step("facts").await;
    browser.click_and_confirm(&format!("{row} form.delete-fact button")).await;
    assert_eq!(browser.text("#notice").await, "Fact deleted.");
    let facts = facts_of(&app, "support-bot", USER).await;
    assert_eq!(facts.len(), 1, "{facts:?}");
    assert_eq!(facts[0]["fact"], "Lives in Lyon");

    // Working memory: each agent's document on the person page; a delete names the version
    // shown, so a document rewritten since is not deleted unseen.
    let document = format!("/api/agents/support-bot/users/{}/working-memory", enc(USER));
    let (status, _) = app.put(&document, &admin, json!({"content": "## Alice\n- order 1182 is late"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let other = format!("/api/agents/sales-bot/users/{}/working-memory", enc(USER));
    let (status, _) = app.put(&other, &admin, json!({"content": "Asked about the spring catalogue"})).await;
    assert_eq!(status, StatusCode::CREATED);
    browser.goto(&format!("/admin/people/{}", enc(USER))).await;
    assert_eq!(browser.count("#working-memory section.document").await, 2);
    let shown = "#working-memory section[data-agent='support-bot']";
    assert_eq!(browser.text(&format!("{shown} pre")).await, "## Alice\n- order 1182 is late");
    let (status, _) = app.put(&document, &admin, json!({"content": "## Alice\n- order 1182 arrived"})).await;
    assert_eq!(status, StatusCode::OK);
    browser.click_and_confirm(&format!("{shown} form.delete-working-memory button")).await;
    assert!(browser.text("#error-message").await.contains("changed since"), "a stale delete is refused");
    browser.expect_console_only_the_refusal(409).await;
    assert_eq!(app.get(&document, &admin).await.1["content"], "## Alice\n- order 1182 arrived");
    browser.goto(&format!("/admin/people/{}", enc(USER))).await;
    browser.click_and_confirm(&format!("{shown} form.delete-working-memory button")).await;
    assert_eq!(browser.text("#notice").await, "Working memory deleted.");
    assert_eq!(app.get(&document, &admin).await.0, StatusCode::NOT_FOUND);
    assert_eq!(browser.count("#working-memory section.document").await, 1);

    // Consent off.
    browser.goto(&format!("/admin/people/{}", enc(USER))).await;
    browser.click("#consent-switch").await;
    assert!(browser.text("#notice").await.starts_with("Consent refused"));
    let (_, consent) = app.get(&format!("/api/users/{}/consent", enc(USER)), &admin).await;
    assert_eq!(consent["ai_consent"], false, "{consent}");
    browser.step("person").await;
    // The same page on a phone.
    browser.client().set_window_size(390, 844).await.expect("phone size");
    browser.goto(&format!("/admin/people/{}", enc(USER))).await;
    let width: Value = browser.js("return document.documentElement.scrollWidth;", vec![]).await;
    assert!(width.as_u64().is_some_and(|w| w <= 390), "no horizontal scrolling on a phone: {width}");
    browser.step("person-phone").await;
    browser.client().set_window_size(1280, 1000).await.expect("laptop size");

    // A conversation with its messages.
    browser.click("#conversations tbody a").await;
    assert_eq!(browser.count("#messages li").await, 4);
    assert!(browser.text("#messages li.user").await.contains("My name is Alice"));
    browser.step("conversation").await;

    // Erase: the confirmation names what goes; then the receipt; then an empty export.
    browser.goto(&format!("/admin/people/{}", enc(USER))).await;
    browser.click("#erase").await;
    assert_eq!(browser.text("#erase-facts").await, "1");
    assert_eq!(browser.text("#erase-conversations").await, "1");
    assert_eq!(browser.text("#erase-messages").await, "4");
    assert_eq!(browser.text("#erase-working-memories").await, "1");
    browser.step("erase-confirm").await;
    browser.click("#erase-confirm").await;
    assert_eq!(browser.text("#notice").await, "Everything about this person was erased.");
    let receipt_id = browser.text("#receipt-id").await;
    assert_eq!(browser.text("#erased-facts").await, "1");
    assert_eq!(browser.text("#erased-conversations").await, "1");
    assert_eq!(browser.text("#erased-messages").await, "4");
    assert_eq!(browser.text("#erased-working-memories").await, "1");
    browser.step("receipt").await;
    let (status, receipt) = app.get(&format!("/api/rgpd/receipts/{receipt_id}"), &admin).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_eq!(receipt["deleted"]["facts"], 1);
    let (_, export) = app.get(&format!("/api/rgpd/users/{}/ai-data", enc(USER)), &admin).await;
    assert_eq!(export["conversations"], json!([]), "{export}");
    assert_eq!(export["facts"], json!([]), "{export}");
    assert_eq!(export["consent"]["ai_consent"], false, "a refusal outlives the erasure: {export}");
    // The panel's own download says the same.
    let cookie = session_cookie(&app, &admin).await;
    let response = raw_client()
        .get(format!("{}/admin/people/{}/export", app.base, enc(USER)))
        .header(header::COOKIE, &cookie)
        .send()
        .await
        .expect("export");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()[header::CONTENT_DISPOSITION].to_str().is_ok_and(|v| v.starts_with("attachment")),
        "a download"
    );
    let panel_export: Value = response.json().await.expect("export json");
    assert_eq!(panel_export, export);

    // Sign out: the panel asks to sign in again.
    browser.click("#sign-out button").await;
    browser.find("#sign-in").await;
    browser.goto("/admin/agents").await;
    assert_eq!(browser.path().await, "/admin/sign-in");
    browser.step("signed-out").await;
    browser.close().await;
}

/// A job that died on an unreachable LLM (with the builtin fallback off, so that it can
/// die): the jobs page shows its error; once the LLM answers, Retry runs it again to success.
async fn dead_job_is_retried_from_the_panel(backend: Backend) {
    let llm_port = free_port();
    let llm_base = format!("http://127.0.0.1:{llm_port}/v1");
    let flags = ["--extractor", "openai", "--llm-base-url", &llm_base, "--llm-model", "m", "--job-max-attempts", "1"];
    let flags = [&flags[..], &["--llm-fallback", "none"]].concat();
    let app = TestApp::spawn_with_memory(backend, &[&flags[..], &["--job-poll-ms", "50"]].concat()).await;
    let (_, ended) =
        converse(&app, "concierge", USER, &["My name is Zorblax.", "I live in Oslo.", "I like tea."]).await;
    let job_id = job_id(&ended);
    let admin = admin("acme");
    // The job dies on the unreachable LLM.
    let dead = job_reaching(&app, &job_id, &["dead"], Duration::from_secs(30)).await;

    let browser = Browser::start(&app, backend, "jobs").await;
    browser.sign_in(&admin).await;
    browser.step("overview-jobs").await;
    browser.click("header nav a[href='/admin/jobs']").await;
    browser.click("#job-filters a[href='/admin/jobs?status=dead']").await;
    let row = format!("tr[data-job-id='{job_id}']");
    let error = browser.text(&format!("{row} .job-error")).await;
    assert_eq!(error, dead["last_error"].as_str().expect("an error"));
    assert!(!error.is_empty());
    browser.step("jobs-dead").await;

    // The LLM comes back; retry.
    let reply = json!({
        "id": "c", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant",
            "content": json!({"operations": [{"op": "add", "fact": "Name is Zorblax", "score": 0.9}]}).to_string()}, "finish_reason": "stop"}]
    });
    let router = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(move || async move { axum::Json(reply) }));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", llm_port)).await.expect("the LLM's port");
    tokio::spawn(async move { axum::serve(listener, router).await });
    browser.click(&format!("{row} button.retry")).await;
    assert_eq!(browser.text("#notice").await, "Job queued again.");
    let done = job_reaching(&app, &job_id, &["succeeded"], Duration::from_secs(30)).await;
    assert_eq!(done["facts_added"], 1, "{done}");
    browser.goto("/admin/jobs?status=succeeded").await;
    assert_eq!(browser.text(&format!("{row} .badge")).await, "succeeded");
    browser.step("jobs").await;
    browser.close().await;
}

/// What the model cost, in the panel: each job's tokens, a job over the tenant's daily
/// budget marked so, and the tokens per agent over the period chosen, with the budget.
async fn the_panel_shows_what_the_model_cost_per_job_and_per_agent_and_the_budget(backend: Backend) {
    let server = wiremock::MockServer::start().await;
    let answer = r#"{"operations": [{"op": "add", "fact": "Name is Zorblax", "score": 0.9}]}"#;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(common::llm::openai_reply(answer))
        .mount(&server)
        .await;
    let app = common::llm::spawn_extracting(backend, "openai", &server, &["--tenant-daily-tokens", "100"]).await;
    let turns = ["My name is Zorblax.", "I live in Oslo.", "I like tea."];
    let admin = admin("acme");
    let mut jobs = Vec::new();
    // The first spends 150 tokens of the 100; the second is over the budget.
    for user in ["zorblax", "quux"] {
        let (_, ended) = converse(&app, "concierge", user, &turns).await;
        let job = job_reaching(&app, &job_id(&ended), &["succeeded", "dead"], Duration::from_secs(20)).await;
        assert_eq!(job["status"], "succeeded", "{job}");
        jobs.push(job["id"].as_str().expect("job id").to_owned());
    }
    // Another agent's tokens of ten days ago: in the last 30 days, not the last 7.
    let old = (chrono::Utc::now() - Duration::from_secs(10 * 86_400)).date_naive();
    app.db
        .execute(&format!(
            "INSERT INTO token_usage (tenant_id, day, agent_id, input_tokens, output_tokens, jobs, over_budget_jobs) \
             VALUES ('acme', '{old}', 'sales', 500, 70, 3, 0)"
        ))
        .await;

    let browser = Browser::start(&app, backend, "usage").await;
    browser.sign_in(&admin).await;
    browser.click("header nav a[href='/admin/jobs']").await;
    let (spent, over) = (format!("tr[data-job-id='{}']", jobs[0]), format!("tr[data-job-id='{}']", jobs[1]));
    assert_eq!(browser.text(&format!("{spent} .job-tokens")).await, "120 / 30");
    assert_eq!(browser.count(&format!("{spent} .badge.over-budget")).await, 0);
    assert_eq!(browser.text(&format!("{over} .badge.over-budget")).await, "over budget: builtin");
    assert!(browser.text(&format!("{over} .job-tokens")).await.starts_with("0 / 0"));
    browser.step("jobs-tokens").await;

    browser.click("header nav a[href='/admin/usage']").await;
    assert_eq!(browser.path().await, "/admin/usage");
    assert_eq!(browser.text("#daily-tokens").await, "100");
    assert_eq!(browser.text("#spent-today").await, "150");
    assert_eq!(browser.text("#over-budget").await, "runs the builtin");
    let concierge = "#usage tr[data-agent='concierge']";
    for (cell, expected) in [
        ("input-tokens", "120"),
        ("output-tokens", "30"),
        ("total-tokens", "150"),
        ("jobs", "2"),
        ("over-budget-jobs", "1"),
    ] {
        assert_eq!(browser.text(&format!("{concierge} .{cell}")).await, expected, "{cell}");
    }
    assert_eq!(browser.count("#usage tr[data-agent='sales']").await, 0, "ten days ago is not in the last 7");
    browser.step("usage-week").await;
    browser.click("#usage-periods a[href='/admin/usage?days=30']").await;
    assert_eq!(browser.text("#usage tr[data-agent='sales'] .total-tokens").await, "570");
    let agents: Vec<String> = browser
        .js("return Array.from(document.querySelectorAll('#usage tbody tr')).map(function (r) { return r.dataset.agent; });", vec![])
        .await
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    assert_eq!(agents, ["sales", "concierge"], "most tokens first");
    browser.step("usage-month").await;
    browser.click("#usage-periods a[href='/admin/usage?days=1']").await;
    assert_eq!(browser.text(&format!("{concierge} .total-tokens")).await, "150");
    assert_eq!(browser.count("#usage tr[data-agent='sales']").await, 0);
    browser.close().await;
    // Only the offered periods.
    let cookie = session_cookie(&app, &admin).await;
    let response = raw_client()
        .get(format!("{}/admin/usage?days=5", app.base))
        .header(header::COOKIE, cookie)
        .send()
        .await
        .expect("usage page");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

/// Issue 25 in the panel: the webhooks page shows a dead delivery with its error, the
/// operator redelivers it once the receiver is back, and a fact's history shows Lyon
/// superseded by Paris with who did it.
async fn a_dead_delivery_is_redelivered_and_a_facts_history_read_in_the_panel(backend: Backend) {
    let port = free_port();
    let flags = ["--webhook-allow-private", "true", "--webhook-max-attempts", "1", "--job-poll-ms", "50"];
    let app = TestApp::spawn_with(backend, &flags).await;
    let admin = admin("acme");
    let (status, subscription) =
        app.post("/api/webhooks", &admin, json!({"url": format!("http://127.0.0.1:{port}/hook")})).await;
    assert_eq!(status, StatusCode::CREATED, "{subscription}");
    let id = subscription["id"].as_str().expect("id").to_owned();
    let facts = format!("/api/agents/concierge/users/{}/facts", enc(USER));
    let (_, lyon) = app.post(&facts, &agent("acme"), json!({"fact": "Lives in Lyon"})).await;
    let (_, paris) = app.post(&facts, &agent("acme"), json!({"fact": "Lives in Paris"})).await;
    let (_, feed) = app.get("/api/events", &admin).await;
    let first = feed["items"][0]["id"].as_i64().expect("the first event");
    // The delivery dies: nobody listens.
    let dead = delivery_reaching(&app, &id, first, "dead", Duration::from_secs(30)).await;

    let browser = Browser::start(&app, backend, "webhooks").await;
    browser.sign_in(&admin).await;
    browser.click("header nav a[href='/admin/webhooks']").await;
    browser.click(&format!("tr[data-subscription-id='{id}'] a")).await;
    let row = format!("tr[data-event-id='{first}']");
    assert_eq!(browser.text(&format!("{row} .badge")).await, "dead");
    assert_eq!(browser.text(&format!("{row} pre")).await, dead["last_error"].as_str().expect("an error"));
    browser.step("webhook-dead").await;
    // The receiver comes back; redeliver.
    let router = axum::Router::new().route("/hook", axum::routing::post(|| async { StatusCode::NO_CONTENT }));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("the receiver's port");
    tokio::spawn(async move { axum::serve(listener, router).await });
    browser.click(&format!("{row} button.retry")).await;
    assert_eq!(browser.text("#notice").await, "Delivery queued again.");
    eventually(Duration::from_secs(30), || async {
        let (_, delivery) = app.get(&format!("/api/webhooks/{id}/deliveries/{first}"), &admin).await;
        (delivery["status"] == "delivered").then_some(())
    })
    .await
    .expect("redelivered");
    browser.goto(&format!("/admin/webhooks/{id}")).await;
    assert_eq!(browser.text(&format!("{row} .badge")).await, "delivered");
    browser.step("webhook").await;
    browser.click(&format!("{row} a.attempts")).await;
    assert_eq!(browser.count("#attempts tbody tr").await, 2, "the failed attempt and the delivered one");
    assert_eq!(browser.text("tr[data-attempt='1'] .attempt-error").await, dead["last_error"].as_str().expect("error"));
    assert_eq!(browser.text("tr[data-attempt='2'] .attempt-error").await, "—");
    browser.step("delivery").await;

    // The current fact's history is a click away; the superseded one's is at its address.
    browser.goto(&format!("/admin/people/{}/agents/concierge", enc(USER))).await;
    browser.click(&format!("tr[data-fact-id='{}'] a.history", paris["id"].as_str().expect("id"))).await;
    assert_eq!(browser.count("#fact-history tbody tr").await, 1);
    assert_eq!(browser.text("tr[data-version='1'] .fact-text").await, "Lives in Paris");
    let lyon_id = lyon["id"].as_str().expect("id");
    browser.goto(&format!("/admin/people/{}/agents/concierge/facts/{lyon_id}/history", enc(USER))).await;
    assert_eq!(browser.count("#fact-history tbody tr").await, 2);
    assert_eq!(browser.text("tr[data-version='2'] .badge").await, "fact.superseded");
    assert_eq!(browser.text("tr[data-version='2'] .actor").await, "api");
    assert_eq!(browser.text("tr[data-version='1'] .fact-text").await, "Lives in Lyon");
    browser.step("fact-history").await;
    browser.close().await;
}

/// A `memory:read` operator (signed in through an `engram admin-link` style link) sees
/// the person's data but no change button, and a forged form post is a 403.
async fn read_only_operator_sees_no_change_buttons_and_forged_posts_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", "support-bot").await;
    converse(&app, "support-bot", USER, &["Hi! My name is Alice."]).await;
    let path = format!("/api/agents/support-bot/users/{}/facts", enc(USER));
    let (status, _) = app.post(&path, &agent("acme"), json!({"fact": "Prefers tea"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let reader = token("acme", "memory:read");

    // The link `engram admin-link` prints: its token travels in the fragment, and the
    // page's script posts it.
    let bind = app.base.trim_start_matches("http://");
    let output = Command::new(env!("CARGO_BIN_EXE_engram"))
        .args(["admin-link", "--tenant", "acme", "--scope", "memory:read", "--ttl", "10m"])
        .args(["--jwt-secret", SECRET, "--bind", bind])
        .output()
        .expect("engram admin-link");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let link = String::from_utf8(output.stdout).expect("utf-8").trim().to_owned();
    let fragment = link.strip_prefix(&format!("{}/admin/sign-in#token=", app.base)).expect("a sign-in link");
    assert!(fragment.split('.').count() == 3, "a JWT in the fragment: {link}");
    let browser = Browser::start(&app, backend, "read-only").await;
    browser.client().goto(&link).await.expect("open the link");
    assert_eq!(browser.text("#scopes").await, "memory:read");
    assert_eq!(browser.path().await, "/admin");
    let facts_page = format!("/admin/people/{}/agents/support-bot", enc(USER));
    for page in [format!("/admin/people/{}", enc(USER)), facts_page.clone(), "/admin/agents".into()] {
        browser.goto(&page).await;
        browser.find("main h1").await;
        assert_eq!(browser.count("main form[method=post]").await, 0, "a change button on {page}");
    }
    browser.goto(&facts_page).await;
    assert_eq!(browser.text("#facts .fact-text").await, "Prefers tea");
    browser.step("read-only-facts").await;
    browser.goto("/admin/agents").await;
    browser.find("#agents-need-admin").await;
    browser.goto("/admin/agents/support-bot").await;
    browser.find("#settings-read-only").await;
    assert_eq!(browser.count("#settings").await, 0);
    browser.step("read-only-agent").await;

    // A forged post, with the session's valid CSRF token: the scope decides, 403.
    let cookie = session_cookie(&app, &reader).await;
    let csrf = csrf_of(&app, &cookie, &facts_page).await;
    let forged = [("csrf", csrf.as_str()), ("fact", "Forged")];
    assert_eq!(post_form(&app, &cookie, &format!("{facts_page}/facts"), &forged).await, StatusCode::FORBIDDEN);
    let switch = [("csrf", csrf.as_str()), ("enabled", "off")];
    assert_eq!(post_form(&app, &cookie, "/admin/agents/support-bot/memory", &switch).await, StatusCode::FORBIDDEN);
    let erase = [("csrf", csrf.as_str())];
    let erase_path = format!("/admin/people/{}/erase", enc(USER));
    assert_eq!(post_form(&app, &cookie, &erase_path, &erase).await, StatusCode::FORBIDDEN);
    // The same forgery from inside the operator's browser.
    browser.goto(&facts_page).await;
    browser.assert_no_console_error().await;
    // This session's own CSRF token, from the page's sign-out form.
    let own = browser.find("#sign-out input[name=csrf]").await.attr("value").await.expect("attr").expect("csrf");
    forge_form(&browser, &format!("{facts_page}/facts"), &[("csrf", Some(&own)), ("fact", Some("Forged"))]).await;
    assert_eq!(browser.text("#error-status").await, "403 Forbidden");
    assert!(browser.text("#error-message").await.contains("memory:write"));
    browser.expect_console_only_the_refusal(403).await;
    browser.step("forged-post").await;
    let facts = facts_of(&app, "support-bot", USER).await;
    assert_eq!(facts.len(), 1, "nothing was added: {facts:?}");
    let (_, config) = app.get("/api/agents-config/support-bot", &admin("acme")).await;
    assert_eq!(config["memory_enabled"], true, "{config}");
    browser.close().await;
}

/// Builds a form with `fields` (a `None` value leaves the field out) in the page and
/// submits it, as a page that forges a post would.
async fn forge_form(browser: &Browser, action: &str, fields: &[(&str, Option<&str>)]) {
    let fields: Vec<Value> = fields.iter().filter_map(|(name, value)| value.map(|v| json!([name, v]))).collect();
    browser
        .js(
            "var form = document.createElement('form'); form.method = 'post'; form.action = arguments[0];\
             arguments[1].forEach(function (f) { var i = document.createElement('input'); i.type = 'hidden';\
               i.name = f[0]; i.value = f[1]; form.appendChild(i); });\
             document.body.appendChild(form); HTMLFormElement.prototype.submit.call(form);",
            vec![json!(action), json!(fields)],
        )
        .await;
}

/// Every state-changing form needs the session's CSRF token: missing or wrong is a 403,
/// in the browser and over plain HTTP; sign-in posted from another site is refused; the
/// cookie is HttpOnly, SameSite=Strict, scoped to /admin, Secure behind TLS, and lives
/// as long as the token; the pages carry the strict CSP.
async fn forms_without_the_session_csrf_token_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", "support-bot").await;
    let admin = admin("acme");
    let facts_page = format!("/admin/people/{}/agents/support-bot", enc(USER));
    let add = format!("{facts_page}/facts");

    // Over HTTP, with a real session.
    let cookie = session_cookie(&app, &admin).await;
    let csrf = csrf_of(&app, &cookie, &facts_page).await;
    assert_eq!(post_form(&app, &cookie, &add, &[("fact", "No token")]).await, StatusCode::FORBIDDEN);
    let wrong = "0".repeat(64);
    assert_eq!(post_form(&app, &cookie, &add, &[("csrf", &wrong), ("fact", "Wrong")]).await, StatusCode::FORBIDDEN);
    let other_session = session_cookie(&app, &token_with(json!({"tenant": "acme", "sub": "other"}))).await;
    let others = csrf_of(&app, &other_session, &facts_page).await;
    assert_ne!(others, csrf, "each session has its own token");
    assert_eq!(post_form(&app, &cookie, &add, &[("csrf", &others), ("fact", "Other")]).await, StatusCode::FORBIDDEN);
    assert_eq!(facts_of(&app, "support-bot", USER).await.len(), 0);
    assert_eq!(post_form(&app, &cookie, &add, &[("csrf", &csrf), ("fact", "Right")]).await, StatusCode::SEE_OTHER);
    assert_eq!(facts_of(&app, "support-bot", USER).await.len(), 1);

    // Sign-in (login CSRF) and form posts from another site.
    let cross =
        post_sign_in(&app, &admin, &[("origin", "http://evil.example"), ("sec-fetch-site", "cross-site")]).await;
    assert_eq!(cross.status(), StatusCode::FORBIDDEN);
    assert!(cross.headers().get(header::SET_COOKIE).is_none());
    let cross_form = raw_client()
        .post(format!("{}{add}", app.base))
        .header(header::COOKIE, &cookie)
        .header(header::ORIGIN, "http://evil.example")
        .form_body(&[("csrf", csrf.as_str()), ("fact", "Cross")])
        .send()
        .await
        .expect("post");
    assert_eq!(cross_form.status(), StatusCode::FORBIDDEN);

    // The cookie.
    let short = token_with(json!({"tenant": "acme", "exp": now() + 600}));
    let response = post_sign_in(&app, &short, &[("x-forwarded-proto", "https")]).await;
    let set = response.headers()[header::SET_COOKIE].to_str().expect("ascii").to_owned();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/admin", "Secure"] {
        assert!(set.split("; ").any(|p| p == part), "{part} in {set}");
    }
    let max_age: u64 =
        set.split("; ").find_map(|p| p.strip_prefix("Max-Age=")).and_then(|v| v.parse().ok()).expect("Max-Age");
    assert!((590..=600).contains(&max_age), "expires with the token: {set}");
    let (status, _) = app.call(Method::GET, "/admin/sign-in", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let page = raw_client().get(format!("{}/admin/sign-in", app.base)).send().await.expect("page");
    assert_eq!(page.headers()[header::CONTENT_SECURITY_POLICY], engram::admin::CSP);
    let missing = raw_client().get(format!("{}/admin/no/such/page", app.base)).send().await.expect("page");
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert!(missing.headers()[header::CONTENT_TYPE].to_str().is_ok_and(|t| t.starts_with("text/html")));
    let expired = token_with(json!({"tenant": "acme", "exp": now() - 120}));
    let refused = post_sign_in(&app, &expired, &[]).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    // A user-bound token is for one person's memory, never for the panel of everyone's.
    let bound = token_with(json!({"tenant": "acme", "agent_id": "support-bot", "external_ref": USER}));
    let refused = post_sign_in(&app, &bound, &[]).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert!(refused.headers().get(header::SET_COOKIE).is_none());

    // In the browser: the real form with its token removed, then with a wrong one.
    let browser = Browser::start(&app, backend, "csrf").await;
    browser.sign_in(&admin).await;
    browser.goto(&facts_page).await;
    browser.step("csrf-form").await;
    browser.js("document.querySelector('#add-fact input[name=csrf]').remove();", vec![]).await;
    browser.type_into("#new-fact", "Missing token").await;
    browser.click("#add-fact button[type=submit]").await;
    assert_eq!(browser.text("#error-status").await, "403 Forbidden");
    assert!(browser.text("#error-message").await.contains("CSRF"));
    browser.expect_console_only_the_refusal(403).await;
    browser.goto(&facts_page).await;
    browser.js("document.querySelector('#add-fact input[name=csrf]').value = 'wrong';", vec![]).await;
    browser.type_into("#new-fact", "Wrong token").await;
    browser.click("#add-fact button[type=submit]").await;
    assert_eq!(browser.text("#error-status").await, "403 Forbidden");
    browser.expect_console_only_the_refusal(403).await;
    let facts = facts_of(&app, "support-bot", USER).await;
    assert_eq!(facts.len(), 1, "{facts:?}");
    browser.goto(&facts_page).await;
    browser.step("csrf-after").await;

    // With the right token, "forget all" (a ticked box and a confirmation) empties the list.
    browser.toggle("#forget-confirm").await;
    browser.click_and_confirm("#forget-facts button[type=submit]").await;
    assert_eq!(browser.text("#notice").await, "Every fact of this agent about this person was deleted.");
    browser.find("#no-facts").await;
    assert_eq!(facts_of(&app, "support-bot", USER).await.len(), 0);
    browser.step("forgotten").await;
    browser.close().await;
}

#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The panel logs like the API: route templates, never the person's ref or words (the
/// other tests of this binary run under the same capture, so their pages count too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panel_logs_hold_no_personal_data() {
    const REF: &str = "citizen-7f3a@example.org";
    const WORDS: &str = "Wunderbaum";
    let captured = Captured::default();
    let writer = captured.clone();
    engram::telemetry::init_logs_to(engram::config::LogFormat::Json, move || writer.clone());

    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = TestApp::spawn_with_memory(backend, &[]).await;
        converse(&app, "concierge", REF, &[&format!("My name is {WORDS}.")]).await;
        let cookie = session_cookie(&app, &admin("acme")).await;
        let person = format!("/admin/people/{}", enc(REF));
        let facts = format!("{person}/agents/concierge");
        let csrf = csrf_of(&app, &cookie, &person).await;
        let get = |path: String| {
            let cookie = cookie.clone();
            let url = format!("{}{path}", app.base);
            async move {
                let response = raw_client().get(url).header(header::COOKIE, cookie).send().await.expect("get");
                assert!(response.status().is_success() || response.status().is_redirection(), "{}", response.status());
            }
        };
        get(format!("/admin/people?ref={}", enc(REF))).await;
        get(person.clone()).await;
        get(format!("{facts}?q={WORDS}")).await;
        let owns = format!("Owns a {WORDS}");
        let add = [("csrf", csrf.as_str()), ("fact", owns.as_str())];
        assert_eq!(post_form(&app, &cookie, &format!("{facts}/facts"), &add).await, StatusCode::SEE_OTHER);
        let bad = [("csrf", csrf.as_str()), ("fact", WORDS), ("score", WORDS)];
        assert_eq!(post_form(&app, &cookie, &format!("{facts}/facts"), &bad).await, StatusCode::OK);
        let consent = [("csrf", csrf.as_str()), ("ai_consent", "off")];
        assert_eq!(post_form(&app, &cookie, &format!("{person}/consent"), &consent).await, StatusCode::SEE_OTHER);
        get(format!("{person}/export")).await;
        get(format!("{person}/erase")).await;
        let erase = [("csrf", csrf.as_str())];
        assert_eq!(post_form(&app, &cookie, &format!("{person}/erase"), &erase).await, StatusCode::SEE_OTHER);
    }

    let logs = String::from_utf8(captured.0.lock().expect("logs").clone()).expect("utf-8 logs");
    assert!(logs.contains("/admin/people/{external_ref}/agents/{agent_id}"), "route templates are logged");
    assert!(logs.contains("end user erased from the admin panel"));
    for secret in [REF, "citizen-7f3a", "example.org", WORDS, &enc(REF), USER, &enc(USER)] {
        assert!(!logs.contains(secret), "the logs contain {secret:?}");
    }
}

/// The panel is a door onto the same operations as the API (`service::facts`): adding a
/// fact past the per-user cap shows the API's own 409 message under the field and stores
/// nothing, and the page's search lists what the API's search answers, in its order.
async fn the_panel_answers_the_fact_cap_and_searches_as_the_api_does(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--max-facts-per-user", "3"]).await;
    app.enable_memory("acme", "support-bot").await;
    let api = format!("/api/agents/support-bot/users/{}/facts", enc(USER));
    for fact in ["Likes jazz music", "Plays jazz piano on Sundays", "Lives in Lyon"] {
        let (status, body) = app.post(&api, &agent("acme"), json!({"fact": fact})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, refused) = app.post(&api, &agent("acme"), json!({"fact": "Owns a cat"})).await;
    assert_error(status, &refused, StatusCode::CONFLICT, "conflict");
    let message = refused["error"]["message"].as_str().expect("a message").to_owned();

    let facts_page = format!("/admin/people/{}/agents/support-bot", enc(USER));
    let cookie = session_cookie(&app, &admin("acme")).await;
    let csrf = csrf_of(&app, &cookie, &facts_page).await;
    let response = raw_client()
        .post(format!("{}{facts_page}/facts", app.base))
        .header(header::COOKIE, &cookie)
        .header(header::ORIGIN, app.base.clone())
        .form_body(&[("csrf", csrf.as_str()), ("fact", "Owns a dog"), ("tags", ""), ("score", "")])
        .send()
        .await
        .expect("post");
    assert_eq!(response.status(), StatusCode::OK, "the form comes back with its reason");
    let html = response.text().await.expect("html");
    assert!(html.contains(&format!("id=\"new-fact-error\">{message}</span>")), "{message} not shown:\n{html}");
    assert_eq!(facts_of(&app, "support-bot", USER).await.len(), 3);

    let (status, found) = app.get(&format!("{api}/search?q=jazz%20piano"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{found}");
    let expected = texts(&found["items"]);
    assert_eq!(expected, ["Plays jazz piano on Sundays", "Likes jazz music"]);
    let page = page_html(&app, &cookie, &format!("{facts_page}?q=jazz+piano")).await;
    let positions: Vec<usize> = expected.iter().map(|fact| page.find(fact).expect("listed by the panel")).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "the panel keeps the API's order: {positions:?}");
    assert!(!page.contains("Lives in Lyon"), "the panel lists only what the search found");
}

/// The panel's search is the API's, recall by meaning included: with the local model, a
/// query that shares no word with a fact finds it on the person's page as in the API.
async fn the_panel_finds_facts_by_meaning_as_the_api_does(backend: Backend) {
    let dir = std::env::var("ENGRAM_TEST_MODEL_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/target/models/all-MiniLM-L6-v2").to_owned());
    assert!(Path::new(&dir).join("model.safetensors").is_file(), "the local model is missing from {dir}");
    let args = ["--embeddings", "local", "--embedding-model-dir", &dir, "--embedding-index-url", "http://127.0.0.1:9/"];
    let app = TestApp::spawn_with(backend, &args).await;
    let api = format!("/api/agents/support-bot/users/{}/facts", enc(USER));
    for fact in ["Has a daughter named Emma", "Lives in Lyon"] {
        let (status, body) = app.post(&api, &agent("acme"), json!({"fact": fact})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    // The facts are embedded in the background, moments after they are stored.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let (status, found) = app.get(&format!("{api}/search?q=my%20kid"), &agent("acme")).await;
        assert_eq!(status, StatusCode::OK, "{found}");
        if texts(&found["items"]).first() == Some(&"Has a daughter named Emma") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the API never found the fact by meaning: {found}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cookie = session_cookie(&app, &admin("acme")).await;
    let page = page_html(&app, &cookie, &format!("/admin/people/{}/agents/support-bot?q=my+kid", enc(USER))).await;
    assert!(page.contains("Has a daughter named Emma"), "the panel found nothing by meaning:\n{page}");
}

/// Beside an extracted fact, the panel quotes the message it was drawn from, one click
/// from its place in the conversation; once the message is cleared, the fact keeps the
/// reference and the page says the words are gone.
async fn the_facts_page_quotes_the_words_each_fact_came_from(backend: Backend) {
    let app = TestApp::spawn_with(backend, &["--job-poll-ms", "50"]).await;
    let settings = json!({"memory_enabled": true, "extract_every_user_turns": null, "min_user_turns": 1});
    let (status, config) = app.put("/api/agents-config/support-bot", &admin("acme"), settings).await;
    assert_eq!(status, StatusCode::OK, "{config}");
    let (conversation, ended) = converse(&app, "support-bot", USER, &["Where is my parcel?", "I live in Lyon."]).await;
    let job = job_reaching(&app, &job_id(&ended), &["succeeded", "dead"], Duration::from_secs(20)).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    let facts = facts_of(&app, "support-bot", USER).await;
    let lyon = facts.iter().find(|f| f["fact"] == "Lives in Lyon").unwrap_or_else(|| panic!("{facts:?}"));
    let row = format!("tr[data-fact-id='{}']", lyon["id"].as_str().expect("id"));

    let browser = Browser::start(&app, backend, "provenance").await;
    browser.sign_in(&admin("acme")).await;
    browser.goto(&format!("/admin/people/{}/agents/support-bot", enc(USER))).await;
    assert_eq!(browser.text(&format!("{row} .quote")).await, "I live in Lyon.");
    assert_eq!(browser.count(&format!("{row} .source")).await, 1);
    browser.step("fact-sources").await;
    browser.click(&format!("{row} a.source-link")).await;
    assert_eq!(browser.path().await, format!("/admin/people/{}/conversations/{conversation}", enc(USER)));
    assert_eq!(browser.text("#m3 .content").await, "I live in Lyon.");

    let (status, cleared) = app.delete(&format!("/api/conversations/{conversation}/messages"), &agent("acme")).await;
    assert_eq!(status, StatusCode::OK, "{cleared}");
    browser.goto(&format!("/admin/people/{}/agents/support-bot", enc(USER))).await;
    assert_eq!(browser.text(&format!("{row} .cleared")).await, "the message was cleared");
    assert_eq!(browser.count(&format!("{row} .quote")).await, 0, "the words are gone");
    browser.step("fact-source-cleared").await;
    browser.close().await;
}

/// Shared memory from the agent page: an agent not configured in the tenant is refused
/// next to the field and nothing changes; a configured one is saved, shown again, and the
/// agent's memory context then holds its facts.
async fn the_panel_sets_whose_facts_an_agent_reads(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    for agent_id in ["profile", "sales-bot"] {
        app.enable_memory("acme", agent_id).await;
    }
    app.enable_memory("globex", "ledger").await;
    let facts = format!("/api/agents/profile/users/{}/facts", enc(USER));
    let (status, body) = app.post(&facts, &agent("acme"), json!({"fact": "Is allergic to shellfish"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let context = format!("/api/agents/sales-bot/users/{}/memory-context", enc(USER));
    let shared = |context: &Value| texts(&context["facts"]).contains(&"Is allergic to shellfish");
    assert!(!shared(&app.get(&context, &agent("acme")).await.1), "nothing shared yet");

    let browser = Browser::start(&app, backend, "shared-memory").await;
    browser.sign_in(&admin("acme")).await;
    browser.goto("/admin/agents/sales-bot").await;
    browser.type_into("#reads_facts_of", "profile ledger").await;
    browser.click("#settings button[type=submit]").await;
    assert_eq!(
        browser.text("#reads_facts_of-error").await,
        "reads_facts_of names agents not configured in this tenant: ledger"
    );
    browser.step("shared-memory-error").await;
    let (_, unchanged) = app.get("/api/agents-config/sales-bot", &admin("acme")).await;
    assert_eq!(unchanged["reads_facts_of"], json!([]), "{unchanged}");

    browser.type_into("#reads_facts_of", "profile").await;
    browser.click("#settings button[type=submit]").await;
    assert_eq!(browser.text("#notice").await, "Settings saved.");
    let (_, config) = app.get("/api/agents-config/sales-bot", &admin("acme")).await;
    assert_eq!(config["reads_facts_of"], json!(["profile"]), "{config}");
    let value = browser.find("#reads_facts_of").await.prop("value").await.expect("the field's value");
    assert_eq!(value.as_deref(), Some("profile"), "the saved list is shown again");
    browser.step("shared-memory").await;
    assert!(shared(&app.get(&context, &agent("acme")).await.1), "sales-bot reads profile's fact");

    browser.type_into("#reads_facts_of", "").await;
    browser.click("#settings button[type=submit]").await;
    assert_eq!(browser.text("#notice").await, "Settings saved.");
    assert!(!shared(&app.get(&context, &agent("acme")).await.1), "emptied: its own facts only");
    browser.close().await;
}

/// The panel's forms refuse NUL as the API's bodies do, raw or as `%00`, in any field,
/// before anything is written: PostgreSQL could not store it and SQLite would.
async fn a_panel_form_holding_nul_is_refused_and_stores_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.enable_memory("acme", "support-bot").await;
    let facts_page = format!("/admin/people/{}/agents/support-bot", enc(USER));
    let cookie = session_cookie(&app, &admin("acme")).await;
    let csrf = csrf_of(&app, &cookie, &facts_page).await;
    let action = format!("{facts_page}/facts");
    for fields in [[("fact", "Owns a\u{0} dog"), ("tags", "")], [("fact", "Owns a dog"), ("tags", "pets\u{0}")]] {
        let mut form = vec![("csrf", csrf.as_str()), ("score", "")];
        form.extend(fields.iter().copied());
        assert_eq!(post_form(&app, &cookie, &action, &form).await, StatusCode::BAD_REQUEST, "{fields:?}");
    }
    assert!(facts_of(&app, "support-bot", USER).await.is_empty(), "nothing was stored");
    let form = [("csrf", csrf.as_str()), ("fact", "Owns a dog"), ("tags", ""), ("score", "")];
    assert_eq!(post_form(&app, &cookie, &action, &form).await, StatusCode::SEE_OTHER, "the same form without NUL");
    assert_eq!(texts(&Value::Array(facts_of(&app, "support-bot", USER).await)), ["Owns a dog"]);
}
