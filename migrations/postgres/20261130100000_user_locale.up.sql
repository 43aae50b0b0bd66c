-- locale is the console language a user chose on the account page: '' follows the browser (a switch's cookie, then Accept-Language), 'en' or 'zh-CN' fixes it.
ALTER TABLE users ADD COLUMN locale VARCHAR(16) NOT NULL DEFAULT '';
