import Foundation
import Testing
import TestSupport
import KVStore
import Workloads

/// Seed 003's models: every validation rule at its boundaries, the errors' messages, and the JSON and
/// store round trips.
@Suite struct PushModelTests {
    let dir = TemporaryDirectory()

    func message(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let error as PushNotificationError {
            return error.errorDescription
        } catch {
            return "unexpected \(error)"
        }
    }

    // MARK: - SDKConfiguration

    @Test func configurationRules() throws {
        let https = "https://push.example.com"
        #expect(message { _ = try SDKConfiguration(apiURL: https, apiKey: "12345678") } == nil)
        for url in ["http://push.example.com", "ftp://push.example.com", "https://", "push.example.com", "not a url", ""] {
            #expect(message { _ = try SDKConfiguration(apiURL: url, apiKey: "12345678") } == "SDK設定が無効です: API URL must use HTTPS", "\(url)")
        }
        #expect(message { _ = try SDKConfiguration(apiURL: https, apiKey: "1234567") } == "SDK設定が無効です: API key must be at least 8 characters")
        #expect(message { _ = try SDKConfiguration(apiURL: https, apiKey: "") } == "SDK設定が無効です: API key must be at least 8 characters")
        // Characters, not bytes: eight kana are enough, seven are not.
        #expect(message { _ = try SDKConfiguration(apiURL: https, apiKey: "あいうえおかきく") } == nil)
        #expect(message { _ = try SDKConfiguration(apiURL: https, apiKey: "あいうえおかき") } != nil)
        for timeout in [5.0, 30, 120] {
            #expect(message { _ = try SDKConfiguration(apiURL: https, apiKey: "12345678", requestTimeout: timeout) } == nil)
        }
        for timeout in [4.0, 4.999, 120.001, 0, -1, .nan, .infinity] {
            #expect(message { _ = try SDKConfiguration(apiURL: https, apiKey: "12345678", requestTimeout: timeout) }
                    == "SDK設定が無効です: Timeout must be between 5 and 120 seconds", "\(timeout)")
        }
        #expect(message { _ = try SDKConfiguration(apiURL: https, apiKey: "12345678", playerAccountId: "") }
                == "SDK設定が無効です: Player account ID must not be empty")
        let configuration = try SDKConfiguration(apiURL: https, apiKey: "12345678")
        #expect(configuration.requestTimeout == 30 && configuration.enableLogging == false && configuration.playerAccountId == nil)
    }

    @Test func aDecodedConfigurationIsValidatedAgain() throws {
        let bad = Data(#"{"apiURL":"http://push.example.com","apiKey":"12345678"}"#.utf8)
        #expect(throws: PushNotificationError.self) { try JSONDecoder().decode(SDKConfiguration.self, from: bad) }
        let good = Data(#"{"apiURL":"https://push.example.com","apiKey":"12345678","requestTimeout":5}"#.utf8)
        #expect(try JSONDecoder().decode(SDKConfiguration.self, from: good).requestTimeout == 5)
    }

    // MARK: - Tokens

    @Test func tokenRules() throws {
        let valid = String(repeating: "0123456789abcdef", count: 4)
        #expect(try DeviceTokenRegistrationRequest(token: valid, playerAccountId: nil).platform == "iOS")
        #expect(try DeviceTokenRegistrationRequest(token: valid.uppercased(), playerAccountId: "p").token == valid.uppercased())
        let invalid = [
            String(valid.dropLast()),                                   // 63 characters
            valid + "0",                                                // 65
            String(valid.dropLast()) + "g",                             // not hex
            String(valid.dropLast()) + "０",                            // a fullwidth digit: isHexDigit, but not APNs
            String(valid.dropLast()) + " ",
            "",
            // The seed's own example token has letters past f: it is not a valid APNs token.
            "a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7r8s9t0u1v2w3x4y5z6a7b8c9d0e1f2",
        ]
        for token in invalid {
            #expect(message { _ = try DeviceTokenRegistrationRequest(token: token, playerAccountId: nil) } == "無効なデバイストークンです。", "\(token)")
        }
        #expect(message { _ = try DeviceTokenRegistrationRequest(token: valid, playerAccountId: "") } == "SDK設定が無効です: Player account ID must not be empty")
    }

    @Test func theRequestMatchesTheSeedsJSON() throws {
        // The seed's example, with a token that passes its own rule.
        let request = try DeviceTokenRegistrationRequest(token: PushSampleData.deviceToken, playerAccountId: "player-12345")
        let json = String(decoding: try PushJSON.encoder().encode(request), as: UTF8.self)
        #expect(json == #"{"platform":"iOS","playerAccountId":"player-12345","token":"\#(PushSampleData.deviceToken)"}"#)
        #expect(try JSONDecoder().decode(DeviceTokenRegistrationRequest.self, from: Data(json.utf8)) == request)
        let otherPlatform = json.replacingOccurrences(of: "iOS", with: "Android")
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(DeviceTokenRegistrationRequest.self, from: Data(otherPlatform.utf8)) }
    }

    @Test func theResponseUsesISO8601AndRoundTripsExactlyThroughJSONAndTheStore() throws {
        let created = try #require(PushJSON.date(fromISO8601: "2025-10-30T09:00:00Z"))
        let updated = try #require(PushJSON.date(fromISO8601: "2025-10-30T09:15:30.250Z"))
        #expect(created == Date(timeIntervalSince1970: 1_761_814_800))
        #expect(updated.timeIntervalSince(created) == 930.25)
        let response = DeviceTokenRegistrationResponse(id: "6f9619ff-8b86-4011-b42d-00c04fc964ff", token: PushSampleData.deviceToken,
                                                       platform: "iOS", playerAccountId: nil, createdAt: created, updatedAt: updated)
        let json = String(decoding: try PushJSON.encoder().encode(response), as: UTF8.self)
        #expect(json == #"{"createdAt":"2025-10-30T09:00:00Z","id":"6f9619ff-8b86-4011-b42d-00c04fc964ff","platform":"iOS","token":"\#(PushSampleData.deviceToken)","updatedAt":"2025-10-30T09:15:30.250Z"}"#)
        #expect(try PushJSON.decoder().decode(DeviceTokenRegistrationResponse.self, from: Data(json.utf8)) == response)
        #expect(throws: DecodingError.self) {
            try PushJSON.decoder().decode(DeviceTokenRegistrationResponse.self, from: Data(json.replacingOccurrences(of: "2025-10-30T09:00:00Z", with: "yesterday").utf8))
        }
        // Through the store (CBOR), a date with sub-millisecond digits comes back exactly.
        let precise = DeviceTokenRegistrationResponse(id: "x", token: PushSampleData.deviceToken, platform: "iOS", playerAccountId: "p",
                                                      createdAt: Date(timeIntervalSince1970: 1_761_814_800.123456), updatedAt: updated)
        let container = try dir.container()
        try container.defaults().set(encodable: precise, forKey: "r")
        #expect(try container.defaults().value(DeviceTokenRegistrationResponse.self, forKey: "r") == precise)
    }

    // MARK: - Payloads

    func payload(_ json: String) throws -> NotificationPayload {
        try NotificationPayload(apnsJSON: Data(json.utf8))
    }

    func alert(title: String, body: String) -> String {
        let object = ["aps": ["alert": ["title": title, "body": body]]]
        return String(decoding: try! JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }

    @Test func theSeedsPayloadParses() throws {
        let parsed = try payload(PushSampleData.validPayload)
        #expect(parsed.title == "New Mission Available!" && parsed.body == "Check out the new daily mission")
        #expect(parsed.badge == 1 && parsed.sound == "default" && parsed.categoryId == "CONFIRM_CATEGORY")
        #expect(parsed.imageUrl == "https://example.com/mission.png")
        #expect(parsed.customData == ["action": .string("open_mission"), "missionId": .string("123")])
        #expect(parsed.actions == [NotificationAction(identifier: "CONFIRM", title: "確認", options: .foreground),
                                   NotificationAction(identifier: "LATER", title: "後で")])
        // The same from a userInfo dictionary, as iOS hands it over.
        let userInfo: [AnyHashable: Any] = [
            "aps": ["alert": ["title": "New Mission Available!", "body": "Check out the new daily mission"],
                    "badge": 1, "sound": "default", "category": "CONFIRM_CATEGORY"] as [String: Any],
            "imageUrl": "https://example.com/mission.png",
            "customData": ["action": "open_mission", "missionId": "123"],
        ]
        #expect(try NotificationPayload(userInfo: userInfo) == parsed)
    }

    @Test func titleAndBodyLengthsAtTheirBoundaries() throws {
        #expect(try payload(alert(title: "a", body: "b")).title == "a")
        #expect(try payload(alert(title: String(repeating: "題", count: 100), body: String(repeating: "本", count: 500))).body.count == 500)
        // Characters, not bytes or scalars: a family emoji is one.
        #expect(try payload(alert(title: String(repeating: "👨‍👩‍👧", count: 100), body: "b")).title.count == 100)
        let cases: [(String, String, String)] = [
            ("", "b", "aps.alert.title: title must be 1 to 100 characters, got 0"),
            (String(repeating: "a", count: 101), "b", "aps.alert.title: title must be 1 to 100 characters, got 101"),
            ("a", "", "aps.alert.body: body must be 1 to 500 characters, got 0"),
            ("a", String(repeating: "b", count: 501), "aps.alert.body: body must be 1 to 500 characters, got 501"),
        ]
        for (title, body, detail) in cases {
            #expect(message { _ = try payload(alert(title: title, body: body)) } == "レスポンスのデコードに失敗しました: \(detail)")
        }
    }

    @Test func otherFieldsAndWrongShapesAreRefusedWithTheSeedsError() throws {
        let prefix = "レスポンスのデコードに失敗しました: "
        let cases: [(String, String)] = [
            (#"[1, 2]"#, "the payload must be a JSON object, not an array"),
            (#"{"aps": "hello"}"#, "aps: aps must be an object, not a string"),
            (#"{"aps": {"alert": "just a body"}}"#, "aps.alert: aps.alert must be an object, not a string"),
            (#"{"aps": {"alert": {"title": 5, "body": "b"}}}"#, "aps.alert.title: aps.alert.title must be a string, not a number"),
            (#"{"aps": {"alert": {"title": "t", "body": "b"}, "badge": "1"}}"#, "aps.badge: aps.badge must be an integer, not a string"),
            (#"{"aps": {"alert": {"title": "t", "body": "b"}, "badge": -1}}"#, "aps.badge: badge must not be negative, got -1"),
            (#"{"aps": {"alert": {"title": "t", "body": "b"}}, "imageUrl": "not a url"}"#, "imageUrl: imageUrl must be an http or https URL, got \"not a url\""),
            (#"{"aps": {"alert": {"title": "t", "body": "b"}}, "imageUrl": "ftp://example.com/a.png"}"#, "imageUrl: imageUrl must be an http or https URL, got \"ftp://example.com/a.png\""),
            (#"{"aps": {"alert": {"title": "t", "body": "b"}}, "customData": [1]}"#, "customData: customData must be an object, not an array"),
            (#"{"aps": {"alert": {"title": "t", "body": "b"}}"#, "The given data was not valid JSON."),
            (#"{}"#, "aps.alert.title: title must be 1 to 100 characters, got 0"),
        ]
        for (json, detail) in cases {
            #expect(message { _ = try payload(json) } == prefix + detail, "\(json)")
        }
        let huge = #"{"aps": {"alert": {"title": "t", "body": "\#(String(repeating: "b", count: 5000))"}}}"#
        #expect(message { _ = try payload(huge) } == prefix + "the payload is \(huge.utf8.count) bytes, over APNs' 4096-byte limit")
        // Custom data keeps its JSON types.
        let typed = try payload(#"{"aps": {"alert": {"title": "t", "body": "b"}}, "customData": {"n": 3, "x": 1.5, "ok": true, "list": [null, "s"]}}"#)
        #expect(typed.customData == ["n": .integer(3), "x": .double(1.5), "ok": .bool(true), "list": .array([.null, .string("s")])])
    }

    @Test func actionSetsPerCategory() {
        #expect(NotificationAction.actions(forCategoryId: "ACCEPT_DECLINE_CATEGORY") == [
            NotificationAction(identifier: "ACCEPT", title: "受け入れる", options: .foreground),
            NotificationAction(identifier: "DECLINE", title: "拒否", options: .destructive)])
        #expect(NotificationAction.actions(forCategoryId: "CONFIRM_CATEGORY").map(\.identifier) == ["CONFIRM", "LATER"])
        #expect(NotificationAction.actions(forCategoryId: "UNKNOWN").isEmpty)
    }

    @Test func everyErrorHasTheSeedsMessageAndSuggestion() {
        let cases: [(PushNotificationError, String, String?)] = [
            (.permissionDenied, "通知許可が拒否されました。設定アプリから許可してください。", "設定 > {アプリ名} > 通知 から通知を有効にしてください。"),
            (.invalidToken, "無効なデバイストークンです。", nil),
            (.invalidConfiguration("x"), "SDK設定が無効です: x", nil),
            (.serverError(statusCode: 503, message: "busy"), "サーバーエラー (503): busy",
             "しばらく待ってから再試行してください。問題が続く場合はサポートにお問い合わせください。"),
        ]
        for (error, description, suggestion) in cases {
            #expect(error.errorDescription == description)
            #expect(error.recoverySuggestion == suggestion)
        }
        let network = PushNotificationError.networkError(URLError(.notConnectedToInternet))
        #expect(network.errorDescription?.hasPrefix("ネットワークエラー: ") == true)
        #expect(network.recoverySuggestion == "ネットワーク接続を確認して、再試行してください。")
    }

    @Test func aStoredPayloadRoundTripsAndATamperedOneIsRefused() throws {
        let container = try dir.container()
        let store = try PushSDKStore(container: container)
        let parsed = try payload(PushSampleData.validPayload)
        let when = try #require(PushJSON.date(fromISO8601: "2025-10-30T09:30:00.125Z"))
        let record = ReceivedNotification(id: UUID(), receivedAt: when, status: .shown, payload: parsed, error: nil,
                                          rawJSON: PushSampleData.validPayload)
        try store.record(record)
        #expect(try store.received.get(Pair(when, record.id)) == record)
        // A stored payload with an empty title (written raw) does not decode.
        let tampered = try CBOREncoder().encode(["title": "", "body": "b"])
        #expect(throws: (any Error).self) { try CBORDecoder().decode(NotificationPayload.self, from: tampered) }
    }
}
